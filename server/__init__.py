"""The Flower ServerApp of ldpfed simulations (thin: the logic is in simulations/ and ldpfed)."""
