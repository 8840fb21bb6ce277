"""The frequency task: users' categorical attributes, their frequencies estimated (spec:
mechanisms.md, frequency estimation)."""

from __future__ import annotations

from ldpfed.config import Config
from ldpfed.frequency.categorical import oracle_kind
from ldpfed.protocols import diagnostics, frequency
from ldpfed.protocols.privacy import round_event
from ldpfed.tasks.tuples import TupleTask


class FrequencyTask(TupleTask):
    name = "frequency"
    options = ("categories",)
    plan_options = ("categories", "report_dims", "users")
    compare_options = ("categories", "users", "dims", "header", "l2_reference", "estimator", "chunk_users")

    def check_mechanism(self, config: Config) -> None:
        oracle_kind(config.privacy.mechanism)  # grr, oue, or a mean mechanism (histogram-encoded)
        frequency.check_channel([config.aggregation.aggregator], config.privacy.mechanism)  # ibu: a channel

    def server(self, config, data_seed, server_seed, fedavg=None):
        return frequency.server_from_config(self.public(config, data_seed), data_seed)

    def client(self, public, partition_id, data_seed, secret):
        return frequency.client_from_config(public, partition_id, data_seed, secret)

    def preflight(self, config: Config, data_seed: int):
        frequency.check_mechanism(config)  # a synthetic set's shape is known: checked before it is drawn
        described = frequency.read(config, data_seed).description
        config = self.bind(config, data_seed)
        frequency.oracles_from_config(config, data_seed)  # fair or a file: the categories are read
        return config, described, round_event(config, config.privacy.epsilon, config.delta_or_none)

    def observe(self, config: Config, data_seed: int):
        return frequency.read(config, data_seed)

    def epsilon_label(self, summary: dict) -> str:
        """A memoized collection's epsilon is eps_inf, charged once over all rounds, not per round."""
        memoized = summary.get("memoized")
        if not memoized:
            return self.epsilon_unit
        return (
            f"per user over all rounds for a fixed value, charged once (memoized); "
            f"eps_1 = {memoized['epsilon_1']:.4g} against an observer of one round"
        )

    def summary(self, config: Config, server, rows: list[dict], reported: list[dict]) -> dict:
        """TupleTask's figures and, for a memoized (longitudinal) oracle, whom which guarantee protects
        against: the server over all rounds gets each client's total (eps_inf, charged once for a
        fixed value), an observer of any one round eps_1 (`round_observer_guarantees`)."""
        summary = super().summary(config, server, rows, reported)
        oracles = server.oracles
        if oracles.memoized:
            summary["memoized"] = {
                "epsilon_inf": oracles.epsilon,
                "epsilon_1": oracles.epsilon_1,
                "statement": oracles.guarantee,
            }
            summary["round_observer_guarantees"] = [
                {
                    "party": "an observer of any one round (its reports alone)",
                    "epsilon": oracles.epsilon_1,
                    "delta": None,
                    "unit": self.unit,
                }
            ]
        return summary

    def joined(self, config, server, observed, diagnostics_of_clients):
        return diagnostics.frequency_round(server.outcome, observed, self.cohorts(config), config)
