"""NVIDIA's DRA driver for ComputeDomains, simulated (driver.py)."""
