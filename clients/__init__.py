"""The Flower ClientApp of ldpfed simulations (thin: the logic is in simulations/ and ldpfed)."""
