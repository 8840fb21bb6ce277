"""Experiment drivers: repeated collections of one federation, with the predictor's figures beside
the measured ones (`mean`: tuple mean estimation; `frequency`: categorical frequencies)."""
