"""Thin Flower ServerApp and Strategy around ldpfed's server halves (the protocol logic is in ldpfed.protocols)."""
