"""The trusted side: ingest, run a worker, judge its outputs against the reference, the report."""
