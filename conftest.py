"""Loaded by pytest for every collection in this repository (tests/, notebooks/ alone, one notebook): tests always run
offline, whatever the shell exports. No Bedrock calls (paid, or hanging without credentials), no onnxruntime telemetry,
and no probe of the EC2 instance-metadata address (169.254.169.254) when botocore looks for credentials that a test
machine does not have. Set here, before any test, kernel (nbval, papermill) or subprocess starts, so all inherit it."""

from __future__ import annotations

import os
import sys

OFFLINE_ENVIRONMENT = {"WORKBOOK_BACKEND": "offline", "ORT_DISABLE_TELEMETRY": "1", "AWS_EC2_METADATA_DISABLED": "true"}
os.environ.update(OFFLINE_ENVIRONMENT)

# Bytecode caches are written during the tests even where the shell sets PYTHONDONTWRITEBYTECODE (the gitignored
# __pycache__ folders of companion/, tests/ and tools/; the venv's packages are compiled at install). Each xdist worker
# and each kernel or subprocess the tests start would otherwise compile the companion and, on every worker, rewrite
# and compile every test module again: collecting the suite took 7.7 CPU-s a process with it set, 3.9 without.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the workers, kernels and subprocesses started from here on
sys.dont_write_bytecode = False  # this process (pytest's assertion rewriting reads it when it imports a test module)
