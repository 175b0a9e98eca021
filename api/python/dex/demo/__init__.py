"""dexworker in Python: a Dex Worker with a scripted, deterministic model and
demo tools for every policy, used by the chaos suite (`dexchaos matrix
--worker python`). It takes cmd/dexworker's flags and writes its ledger."""
