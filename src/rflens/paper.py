"""The constants of Chi, Fan, Rudnicky and Ramadge (ACL 2023), each stated once.

The presets, the analysis, the claims, the figures and the chapters read them from here, so
that a reader looking for "the paper's ERF threshold" or "its Table 1 grid" opens one file.
Numbers this project chose itself (tolerances, presets, sample sizes) live with the code that
uses them, not here.
"""

# Section 2: the training setting of every model (12 layers, trained on 512 tokens)
L_TR = 512
N_LAYER = 12

# Table 1: the three sweeps, at L_TR with N_LAYER layers
SLOPE_SHIFT = (-3, 0, 3, 6, 8)  # (a) every ALiBi exponent h moved by Delta
SAME_SLOPE = (0, 2, 4, 6, 8)  # (b) one exponent h for every head
WINDOW = (40, 80, 100, 120, 160, 320)  # (c) windowed attention of width w
WINDOW_STABLE = 100  # Section 3: windowed attention extrapolates "up to w = 100" (it diverges from 120)
WINDOW_ERF = {120: 768, 160: 1024, 320: 1536}  # Section 4: the ERF of the windows that diverge

# Section 4: the effective receptive field is where the cumulative normalised gradient
# (most recent token first) reaches this share
ERF_THRESHOLD = 0.99
# Section 4 and Figure 7 take the gradient of one input of 2048 tokens, 4 L_tr
ERF_INPUT_MULT = 4

# Sections 6-7 and Figure 10: Sandwich's bias with compression ratio c, over the hidden sizes d_bar
SANDWICH_COMPRESSION = 8.0
SANDWICH_D_BAR = 128  # Sandwich's d_bar in the paper's models
D_BAR = (32, 64, 128, 256)
# Section 7: Sandwich at SANDWICH_D_BAR and one head of h_c = 8, fitted by a log curve
# a * log(1 + k) + b over the distances k = 0 .. LOG_FIT_LENGTH - 1
LOG_FIT_LENGTH = 8192
SMOOTHED_SANDWICH = (-0.825, -0.8)  # the paper's (a, b)
LOG_FIT_RECENT = 50  # footnote 7: the fit uses "the most recent 50 points" of Sandwich

# Figure 11: the share of Sandwich's cumulative gradient on the last L_tr tokens
SANDWICH_SHARE_IN_LTR = 0.6
# Section 6: T5's training is this much slower than Sandwich's
T5_SLOWDOWN = 0.10
