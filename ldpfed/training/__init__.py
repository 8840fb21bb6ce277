"""Training layer for federated LDP-SGD (spec: federated.md, Federated LDP-SGD).

Pure library code that the Flower apps call; it never imports flwr. torch is imported only by
the modules that need it (`models`, `local`, and `parameters.set_weights`), so importing
`ldpfed.training.privatize` (numpy only) on a server costs no torch import.

- `models`: logistic regression, the thesis' MLP and CNN (`build_model`).
- `parameters`: model weights <-> lists of numpy arrays <-> one flat vector.
- `local`: E local SGD steps and evaluation.
- `privatize`: clipping and per-coordinate LDP perturbation of a client's update.
"""
