"""The transformer language model and every positional scheme it can carry.

- ``positional``: every scheme's implementation (additive biases, rotary, absolute).
- ``attention``: the attention kernels the biases feed.
- ``transformer``: the language model (Chi et al., ACL 2023, Section 2).
- ``analysis``: closed forms of the biases (Sections 6-7).

May import: ``setup`` and the package root.
"""
