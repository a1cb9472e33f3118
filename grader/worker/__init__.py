"""The untrusted side: imports a submission and runs probes on it. Imports nothing trusted."""
