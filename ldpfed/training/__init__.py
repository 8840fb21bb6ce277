"""Training layer for federated LDP-SGD (spec: federated.md, Federated LDP-SGD).

Pure library code that the Flower apps call; it never imports flwr. torch is imported by the
functions that use it, not at module level, so importing any of these modules (and the train
protocol above them) costs no torch import until a model is built or trained: a mean or frequency
node never loads torch.

- `models`: logistic regression, the thesis' MLP and CNN (`build_model`).
- `parameters`: model weights <-> lists of numpy arrays <-> one flat vector.
- `local`: E local SGD steps and evaluation.
- `cohort`: many clients' local SGD at once (`CohortTrainer`).
- `privatize`: clipping and per-coordinate LDP perturbation of a client's update (`UpdatePrivatizer`),
  and the `Privatizer` protocol every way of releasing an update follows.
- `noise_privatizer`: L2 clipping and a gradient noise from the literature (`NoisePrivatizer`).
"""
