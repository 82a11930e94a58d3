"""The explorers as one page with a live kernel: ``python -m rflens explore``.

The book's static pages draw precomputed figures; the ipywidgets explorers need a kernel.
For a reader who does not want to open a notebook, ``explore`` serves the notebook
``explore.ipynb`` next to this module with Voilà: its outputs only, the code hidden, every
control answered by the kernel. Two tabs: the bias explorer (every relative scheme and its
knobs) and the receptive-field explorer over the models of the run store at the chosen
scale (Figure 11's and Table 1's, if they are stored).
"""

from __future__ import annotations

from pathlib import Path
from rflens.setup import presets

NOTEBOOK = Path(__file__).with_name("explore.ipynb")


def stored_curves(scale: str) -> dict[str, dict]:
    """Receptive-field curves of the stored Figure 11 and Table 1 models at ``scale``
    (measured now if a stored model lacks them); {} when none is stored."""
    from rflens.errors import UserError
    from rflens.experiments import tables as ex

    curves = {}
    for experiment in ("figure11", "table1"):
        for spec in ex.models_of(presets.get(scale), experiment):
            try:
                curves.update(ex.erf_curves(presets.get(scale), [spec], train=False))
            except UserError:  # not stored: nothing to show for it
                continue
    return curves


def app(scale: str):
    """The page: a title, then the bias explorer and the receptive-field explorer in tabs."""
    import ipywidgets as W

    from rflens.widgets.bias import bias_explorer
    from rflens.widgets.results import erf_explorer

    curves = stored_curves(scale)
    from rflens.setup.presets import get

    fix = (f"its bundle in <code>reference/{scale}</code> holds none of them yet (<code>python -m rflens emergence "
           f"--scale {scale} --list</code> shows what it lacks)" if get(scale).shipped else
           f"<code>python -m rflens reproduce --scale {scale}</code> (or <code>make book</code>) trains them, then "
           "reload this page")
    fields = erf_explorer(curves) if curves else W.HTML(
        f"<p>No Figure 11 or Table 1 model of the <code>{scale}</code> book is stored yet: {fix}.</p>")
    tabs = W.Tab(children=[bias_explorer(), fields])
    tabs.set_title(0, "positional biases")
    tabs.set_title(1, f"receptive fields ({scale})")
    head = W.HTML("<h2>rflens explorers</h2><p>Chi et al. (ACL 2023), <i>Dissecting Transformer Length "
                  "Extrapolation via the Lens of Receptive Field Analysis</i>: every control is answered by a "
                  "live kernel.</p>")
    return W.VBox([head, tabs], layout={"width": "100%"})
