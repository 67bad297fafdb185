"""Layer 0, notebook support: where things are (paths, the workspace), parameters, tables, plots, the claims ledger,
message shapes and the data loaders. Imports nothing else from the companion."""
