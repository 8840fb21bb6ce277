"""ldpfed: local differential privacy in federated settings.

The core library is pure numpy/scipy: randomizers (`ldpfed.mechanisms`), the CLT error
predictor (`ldpfed.analysis`), server-side recalibration (`ldpfed.aggregation`), accounting and
data. Flower apps live outside this package (`clients/`, `server/`) and import it, never the
reverse.
"""

__version__ = "0.1.0"
