"""Thin Flower ClientApp around ldpfed's client halves (the protocol logic is in ldpfed.protocols)."""
