"""Loaded by pytest for every collection in this repository (tests/, notebooks/ alone, one notebook): tests always run
offline, whatever the shell exports. No Bedrock calls (paid, or hanging without credentials), no onnxruntime telemetry,
and no probe of the EC2 instance-metadata address (169.254.169.254) when botocore looks for credentials that a test
machine does not have. Set here, before any test, kernel (nbval, papermill) or subprocess starts, so all inherit it."""

from __future__ import annotations

import os

OFFLINE_ENVIRONMENT = {"WORKBOOK_BACKEND": "offline", "ORT_DISABLE_TELEMETRY": "1", "AWS_EC2_METADATA_DISABLED": "true"}
os.environ.update(OFFLINE_ENVIRONMENT)
