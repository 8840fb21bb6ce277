"""Per-client privacy ledger across federated rounds (spec: gradient-noise.md, Accounting across
rounds; federated.md, Accounting per client).

Each round a client takes part in, it records the (eps, delta) its report cost (for ldpfed's
update privatizer: the client's full per-round budget). `totals()` composes them per client:

- basic composition: eps and delta add up (always valid; the headline figure).
- advanced composition (Dwork, Rothblum & Vadhan 2010; the heterogeneous form of Kairouz, Oh &
  Viswanath 2015, Thm 3.5 without its tightening): for rounds with eps_i, delta_i and a slack
  delta' (= `delta_target`),
      eps_adv = sqrt(2 ln(1/delta') * sum eps_i^2) + sum eps_i (e^eps_i - 1),  delta_adv = sum delta_i + delta'.
  Reported only when smaller than the basic eps (with few rounds or large eps it is not).
- RDP (Gaussian rounds only): dp_accounting's RdpAccountant composes one GaussianDpEvent per
  round with that round's noise multiplier and converts to eps at `delta_target`. ldpfed's
  per-coordinate Gaussian reports m values of sensitivity 2 with noise sd s, i.e. noise
  multiplier s/2 each; m of them compose in RDP to one Gaussian with noise multiplier
  (s/2)/sqrt(m) (`UpdatePrivatizer.noise_multiplier`). Pure mechanisms never get an RDP figure.

No amplification by the server's client sampling is claimed: LDP protects each report on its
own, the client knows whether it was sampled (its loss counts in every round it took part in),
and the sampling is done by the untrusted server the guarantee is meant to hold against.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from ldpfed.validation import LDPValueError, check_fraction, check_positive_int

DEFAULT_DELTA_TARGET = 1e-5
ACCOUNTANTS = {
    "basic": "basic composition (sum of eps and delta over the rounds)",
    "advanced": "advanced composition, Dwork-Rothblum-Vadhan 2010 (heterogeneous form)",
    "rdp": "dp_accounting RdpAccountant, GaussianDpEvent per round (Gaussian rounds only)",
}


@dataclass(frozen=True)
class LedgerEntry:
    client_id: str
    round: int
    epsilon: float
    delta: float
    mechanism: str
    noise_multiplier: float | None = None


def advanced_composition(epsilons, delta_slack: float) -> float:
    """eps of the DRV advanced composition of pure/approximate rounds with eps_i at slack delta'."""
    eps = np.asarray(epsilons, dtype=float)
    if eps.size == 0:
        return 0.0
    if not np.all(np.isfinite(eps)):
        return math.inf
    return float(math.sqrt(2.0 * math.log(1.0 / delta_slack) * np.sum(eps**2)) + np.sum(eps * np.expm1(eps)))


@lru_cache(maxsize=1024)
def _rdp_epsilon(rounds: tuple[tuple[float, int], ...], delta_target: float) -> float:
    """dp_accounting RDP eps for Gaussian rounds given as ((noise_multiplier, count), ...)."""
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    accountant = RdpAccountant()
    for multiplier, count in rounds:
        accountant.compose(dp_accounting.GaussianDpEvent(multiplier), count)
    return float(accountant.get_epsilon(delta_target))


def _check_delta_target(delta_target: float) -> float:
    return check_fraction(delta_target, "delta_target")


class PrivacyLedger:
    """Each client's privacy cost per round, and its totals over the rounds it took part in."""

    def __init__(self) -> None:
        self._entries: list[LedgerEntry] = []
        self._seen: set[tuple[str, int]] = set()

    def __len__(self) -> int:
        return len(self._entries)

    def record(
        self,
        client_id,
        round: int,
        epsilon: float,
        delta: float | None,
        mechanism: str,
        noise_multiplier: float | None = None,
    ) -> None:
        """Record one round of one client: eps > 0 (inf for no privacy), delta in [0, 1)."""
        client = str(client_id)
        round = check_positive_int(round, "round", minimum=0)
        if (client, round) in self._seen:
            raise LDPValueError(f"client {client!r} already has an entry for round {round}")
        try:
            epsilon = float(epsilon)
        except (TypeError, ValueError):
            raise LDPValueError(f"epsilon must be a number > 0 (inf for no privacy), got {epsilon!r}") from None
        if math.isnan(epsilon) or epsilon <= 0:
            raise LDPValueError(f"epsilon must be > 0 (inf for no privacy), got {epsilon!r}")
        delta = 0.0 if delta is None else float(delta)
        if not (0.0 <= delta < 1.0):
            raise LDPValueError(f"delta must be in [0, 1), got {delta!r}")
        if noise_multiplier is not None:
            noise_multiplier = float(noise_multiplier)
            if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
                raise LDPValueError(f"noise_multiplier must be a finite number > 0, got {noise_multiplier!r}")
        self._entries.append(LedgerEntry(client, round, epsilon, delta, str(mechanism), noise_multiplier))
        self._seen.add((client, round))

    def totals(self, delta_target: float = DEFAULT_DELTA_TARGET) -> dict[str, dict]:
        """str(client_id) -> {rounds, basic_epsilon, basic_delta, advanced_epsilon, advanced_delta,
        rdp_epsilon, rdp_delta, mechanisms}; unavailable figures are None."""
        delta_target = _check_delta_target(delta_target)
        by_client: dict[str, list[LedgerEntry]] = {}
        for entry in self._entries:
            by_client.setdefault(entry.client_id, []).append(entry)
        result = {}
        for client, entries in by_client.items():
            eps = np.array([e.epsilon for e in entries])
            deltas = np.array([e.delta for e in entries])
            basic_eps, basic_delta = float(eps.sum()), float(deltas.sum())
            advanced = advanced_composition(eps, delta_target)
            use_advanced = advanced < basic_eps
            multipliers = [e.noise_multiplier for e in entries]
            rdp = None
            if all(z is not None for z in multipliers):
                rdp = _rdp_epsilon(tuple(sorted(Counter(multipliers).items())), delta_target)
            result[client] = {
                "rounds": len(entries),
                "mechanisms": sorted({e.mechanism for e in entries}),
                "basic_epsilon": basic_eps,
                "basic_delta": basic_delta,
                "advanced_epsilon": advanced if use_advanced else None,
                "advanced_delta": basic_delta + delta_target if use_advanced else None,
                "rdp_epsilon": rdp,
                "rdp_delta": delta_target if rdp is not None else None,
            }
        return result

    def to_frame(self, delta_target: float = DEFAULT_DELTA_TARGET) -> pd.DataFrame:
        """One row per client with its totals (for CSV/Parquet)."""
        columns = ["client_id", "rounds", "mechanisms", "basic_epsilon", "basic_delta", "advanced_epsilon",
                   "advanced_delta", "rdp_epsilon", "rdp_delta"]
        rows = [
            {"client_id": client, **{**total, "mechanisms": ",".join(total["mechanisms"])}}
            for client, total in self.totals(delta_target).items()
        ]
        return pd.DataFrame(rows, columns=columns)

    def entries_frame(self) -> pd.DataFrame:
        """Every recorded round (the accountants' inputs)."""
        return pd.DataFrame([asdict(e) for e in self._entries], columns=list(LedgerEntry.__dataclass_fields__))

    def state_dict(self, delta_target: float = DEFAULT_DELTA_TARGET) -> dict:
        """JSON-ready record: the accountants, their inputs (entries) and outputs (totals)."""
        return {
            "accountants": ACCOUNTANTS,
            "delta_target": _check_delta_target(delta_target),
            "amplification_by_client_sampling": False,
            "entries": [asdict(e) for e in self._entries],
            "totals": self.totals(delta_target),
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> "PrivacyLedger":
        ledger = cls()
        for entry in state.get("entries", []):
            ledger.record(**entry)
        return ledger
