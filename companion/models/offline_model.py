"""A deterministic Strands model that knows only what is in the call it receives.

Most workshop attendees have no Bedrock access and CI has none at all, so every notebook runs by
default on this model. It is a real ``strands.models.Model``: the agent loop, session managers,
conversation managers, hooks and memory tools all drive it exactly as they drive Bedrock. What it
answers comes only from the text of the call (system prompt, messages, tool results, injected
``<memory>`` blocks, summaries), read with the rules in :mod:`companion.models.facts`. When a fact leaves
the context it cannot answer it, which is what makes forgetting visible and honest.
"""

from __future__ import annotations

import dataclasses
import gc
import html
import json
import math
from collections.abc import AsyncGenerator, AsyncIterable, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict, TypeVar

from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Messages
from strands.types.exceptions import ContextWindowOverflowException
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from companion.models import facts as fact_rules
from companion.models.converse_rules import NOVA_PRO_CONTEXT_WINDOW
from companion.models.style_rules import active_rules, apply_style
from companion.models.voices import VOICES, pick, resolve_voice
from companion.support.messages import (
    EXTRACTION_REQUEST,
    SUMMARY_REQUEST,
    SUMMARY_TITLE,
    content_summary_parts,
    context_status,
    is_content_summary_request,
    is_extraction_request,
    is_summary,
    is_summary_request,
    message_text,
    without_context_status,
)

__all__ = [
    "ADD_TOOL_NAME",
    "CONTEXT_SUMMARIZE_AT",
    "EXTRACTION_REQUEST",
    "SEARCH_TOOL_NAME",
    "SUMMARIZE_CONTEXT_TOOL",
    "SUMMARY_REQUEST",
    "SUMMARY_TITLE",
    "OfflineModel",
    "OfflineModelConfig",
    "is_summary",
    "is_summary_request",
    "message_text",
]

T = TypeVar("T", bound=BaseModel)

"""Nova Pro's context window: the seeds ran on amazon.nova-pro-v1:0, so threshold ratios mean the same here."""

SEARCH_TOOL_NAME = "search_memory"
"""The name of the search tool that ``strands.memory.MemoryManager`` offers."""

ADD_TOOL_NAME = "add_memory"
"""The name of the add tool that ``strands.memory.MemoryManager`` offers when add_tool_config is on."""

SUMMARIZE_CONTEXT_TOOL = "summarize_context"
"""One of the tools ``Agent(context_manager="agentic")`` injects: it folds the oldest messages into a summary."""

CONTEXT_SUMMARIZE_AT = 0.85
"""The offline model's rule for the agentic context manager: when the ``<context-status>`` block of a call shows this
share of the context window used or more, and ``summarize_context`` is offered, it calls that tool (no arguments, so
the SDK's defaults apply) before answering. 0.85 is the share at which ``context_manager="auto"`` summarizes, so the two
presets act at the same utilization."""


class OfflineModelConfig(TypedDict, total=False):
    """Settings of the offline model.

    Attributes:
        model_id: A name shown in logs and metadata.
        context_window_limit: The context window, in tokens, that utilization ratios are computed against.
        overflow_at_tokens: When set, a call whose estimated input exceeds it raises the SDK's
            ContextWindowOverflowException, as a real model does when its window is full.
        voice: "plain" (the committed outputs) or "paraphrase" (same rules, other words; see companion/models/voices.py);
            default $WORKBOOK_VOICE, else "plain".
        validate_requests: Refuse, as Bedrock's Converse API does and with its words, a request whose messages
            break one of companion.models.converse_rules.RULES (a toolUse without its toolResult, roles that do not
            alternate, an empty text block ...): raises converse_rules.ValidationException.
    """

    model_id: str
    context_window_limit: int
    overflow_at_tokens: int | None
    voice: str
    validate_requests: bool


def _tagged(text: str, tag: str, attributes: bool) -> list[tuple[int, int, int, int]]:
    """Spans of ``<tag ...>content</tag>`` elements: (start, end, content start, content end), in order.

    A scan with str.find that never goes back, so a text full of unclosed tags costs one pass, not one pass per tag.
    """
    spans: list[tuple[int, int, int, int]] = []
    opener, closer = f"<{tag}", f"</{tag}>"
    position = 0
    while True:
        start = text.find(opener, position)
        if start < 0:
            break
        after = start + len(opener)
        following = text[after : after + 1]
        if following == ">":
            close_of_open = after
        elif attributes and following.isspace():
            close_of_open = text.find(">", after)
            if close_of_open < 0:
                break
        else:
            position = start + 1
            continue
        content_end = text.find(closer, close_of_open + 1)
        if content_end < 0:
            break  # no later opener can be closed either
        spans.append((start, content_end + len(closer), close_of_open + 1, content_end))
        position = content_end + len(closer)
    return spans


def _without_memory_blocks(text: str, filler: str) -> str:
    """The text with every ``<memory>...</memory>`` block replaced by `filler`."""
    spans = _tagged(text, "memory", attributes=False)
    if not spans:
        return text
    pieces, done = [], 0
    for start, end, _, _ in spans:
        pieces += [text[done:start], filler]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _memory_entries(text: str) -> list[str]:
    """Memory contents in a text: ``<entry>`` elements, or a search tool's JSON list of ``{"content": ...}``."""
    entries = [html.unescape(text[a:b]).strip() for _, _, a, b in _tagged(text, "entry", attributes=True)]
    if not text.lstrip().startswith(("[", "{")):
        return entries
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return entries
    items = data if isinstance(data, list) else [data]
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("content"), str):
            entries.append(item["content"].strip())
    return entries


def _tool_failed(messages: Messages) -> bool:
    """Whether any tool result among these messages reports an error."""
    return any(b["toolResult"].get("status") == "error" for m in messages for b in m["content"] if "toolResult" in b)


def _readable(texts: list[str]) -> list[str]:
    """Texts as the fact reader should see them: memory blocks and search results unwrapped into their entries."""
    out: list[str] = []
    for text in texts:
        entries = _memory_entries(text)
        if entries:
            rest = _without_memory_blocks(text, " ").strip()
            if rest and not rest.startswith(("[", "{")):
                out.append(rest)
            out.extend(entries)
        else:
            out.append(text)
    return out


def _possessive(key: str) -> str:
    return f"your {key}"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _join(parts: list[str], word: str = "and") -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + f" {word} " + parts[-1]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a reply is worked out.

    Reading a megabyte of text creates tens of thousands of small tuples and strings, none of them in a reference
    cycle; with the collector running, its repeated scans of them take about as long as the reading itself.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _said(block: dict[str, Any]) -> bool:
    """Whether a content block holds text someone wrote: a ``<context-status>`` block the agentic context manager
    appends (to a tool result too) is not a message to respond to."""
    return "text" in block and bool(without_context_status(block["text"]).strip())


@dataclasses.dataclass
class _Call:
    """One call as the rules read it; each text is worked out once, and only when a rule needs it."""

    messages: Messages
    system_prompt: str | None
    tool_names: list[str]
    _cache: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def message_texts(self) -> list[str]:
        """The text of every message, tool results included."""
        if "texts" not in self._cache:
            self._cache["texts"] = [message_text(m) for m in self.messages]
        return self._cache["texts"]

    @property
    def readable_texts(self) -> list[str]:
        """The system prompt and the messages, with memory blocks and search results unwrapped into entries."""
        prompt = [self.system_prompt] if self.system_prompt else []
        return _readable(prompt) + _readable(self.message_texts)

    @property
    def question_message(self) -> dict[str, Any] | None:
        """The latest user message with text in it: the one the model responds to."""
        if "question_message" not in self._cache:
            self._cache["question_message"] = next(
                (m for m in reversed(self.messages) if m["role"] == "user" and any(_said(b) for b in m["content"])),
                None,
            )
        return self._cache["question_message"]

    @property
    def question(self) -> str:
        """The text of that message without any injected ``<memory>`` block."""
        message = self.question_message
        if message is None:
            return ""
        if "question" not in self._cache:
            texts = (
                _without_memory_blocks(without_context_status(b["text"]), "").strip()
                for b in message["content"]
                if "text" in b
            )
            self._cache["question"] = " ".join(texts).strip()
        return self._cache["question"]

    @property
    def tool_used(self) -> bool:
        """Whether a tool already ran for that message (it is not the last message of the call)."""
        return self.question_message is not None and self.question_message is not self.messages[-1]


class OfflineModel(Model):
    """A model that reads facts from its context and answers from the latest visible statement.

    Behaviour, in the order it is checked on each call (one method per rule, ``_summary_rule`` to ``_question_rule``):
      1. Summarization request (the SDK's "Please summarize this conversation.", or the context manager's
         ``<content>`` ... ``</content>`` request): a bullet summary that restates every fact stated in the
         messages it was given, and nothing else.
      2. Extraction request (the SDK's ModelExtractor): a JSON array of the facts in the user's lines.
      2b. A ``<context-status>`` block (``context_manager="agentic"``) showing CONTEXT_SUMMARIZE_AT of the window
         or more used, with ``summarize_context`` offered: a call to that tool, once per message, then rules 4-5.
      3. "Please remember that ..." with an ``add_memory`` tool offered: a call to that tool with the sentence
         restated in the third person, then a confirmation.
      4. Anything that is not a question: an acknowledgement that repeats the facts the message stated.
      4b. "What did I say about the X?": the user's earlier sentences that name X, quoted, or that it sees none.
      5. A question ("...?"): answered from visible facts or memory entries; what it cannot see it says it
         cannot see. If a ``search_memory`` tool is offered and the answer is not visible, it calls the tool
         once and answers from the tool result.
      6. A style instruction in the system prompt ("Always answer in metric units."; the list is
         :data:`companion.models.style_rules.STYLE_RULES`): the text reply of rules 3-5 rewritten to follow it.
    The statement and question forms it reads are listed, with examples, in :data:`companion.models.facts.RULES`.
    Every call reports usage as Bedrock does: input tokens by the SDK's own estimate, output tokens by the
    same characters/4 rule.
    """

    def __init__(self, **config: Any) -> None:
        """Create the model; see :class:`OfflineModelConfig` for the settings."""
        self.config: OfflineModelConfig = {
            "model_id": "offline-fact-reader",
            "context_window_limit": NOVA_PRO_CONTEXT_WINDOW,
            "overflow_at_tokens": None,
            "voice": resolve_voice(None),
            "validate_requests": False,
        }
        self.update_config(**config)

    def update_config(self, **model_config: Any) -> None:
        """Change settings; unknown names are refused so a typo cannot pass silently."""
        unknown = set(model_config) - set(OfflineModelConfig.__annotations__)
        if unknown:
            raise ValueError(
                f"OfflineModel has no setting {sorted(unknown)}; "
                f"the settings are {sorted(OfflineModelConfig.__annotations__)}"
            )
        limit = model_config.get("context_window_limit", self.config.get("context_window_limit"))
        if not isinstance(limit, int) or limit <= 0:
            raise ValueError(f"context_window_limit must be a positive number of tokens, got {limit!r}")
        overflow = model_config.get("overflow_at_tokens", self.config.get("overflow_at_tokens"))
        if overflow is not None and (not isinstance(overflow, int) or overflow <= 0):
            raise ValueError(f"overflow_at_tokens must be a positive number of tokens or None, got {overflow!r}")
        if "voice" in model_config:
            model_config["voice"] = resolve_voice(model_config["voice"])
        self.config.update(model_config)  # type: ignore[typeddict-item]

    @property
    def voice(self):
        """The wordings of this model's voice (companion/models/voices.py)."""
        return VOICES[self.config.get("voice") or "plain"]

    def get_config(self) -> OfflineModelConfig:
        """The current settings."""
        return self.config

    # ------------------------------------------------------------------ answering

    def respond(
        self,
        messages: Messages,
        system_prompt: str | None = None,
        tool_names: list[str] | None = None,
    ) -> dict[str, Any]:
        """Decide the reply to one call: ``{"text": ...}`` or ``{"tool": name, "input": {...}}``.

        The rules are tried in order and the first that applies answers (see the class docstring). Public so that
        tests and notebook 00 can show the rules without running an agent.
        """
        call = _Call(messages, system_prompt, tool_names or [])
        with _collector_paused():
            return self._first_reply(call)

    def _first_reply(self, call: _Call) -> dict[str, Any]:
        """The reply of the first rule that applies to the call."""
        for rule in (
            self._summary_rule,
            self._extraction_rule,
            self._context_tool_rule,
            self._remember_rule,
            self._statement_rule,
            self._quote_rule,
            self._question_rule,
        ):
            reply = rule(call)
            if reply is not None:
                return reply if rule in (self._summary_rule, self._extraction_rule) else self._styled(reply, call)
        return self._styled({"text": self.voice.no_message}, call)

    def _styled(self, reply: dict[str, Any], call: _Call) -> dict[str, Any]:
        """Rule 6: a text reply rewritten as the style instructions in the system prompt want it
        (companion.models.style_rules); unchanged when the prompt carries none."""
        if "text" not in reply or not active_rules(call.system_prompt):
            return reply
        voice = self.config.get("voice") or "plain"
        return {"text": apply_style(reply["text"], call.system_prompt, call.message_texts, voice)}

    def _summary_rule(self, call: _Call) -> dict[str, Any] | None:
        """Rule 1: the summarizing manager's "Please summarize this conversation." gets a summary of the messages
        before it that restates every fact they state, and nothing else. The context manager's request (one user
        message wrapping the messages in ``<content>`` ... ``</content>``) gets the same summary of the messages
        inside it."""
        if is_content_summary_request(call.messages):
            return {"text": self._summary([text for _, text in content_summary_parts(call.messages[0])])}
        if not is_summary_request(call.messages):
            return None
        return {"text": self._summary([message_text(m) for m in call.messages[:-1]])}

    def _context_tool_rule(self, call: _Call) -> dict[str, Any] | None:
        """Rule 2b: with ``summarize_context`` offered (``context_manager="agentic"``), a call whose last message carries
        a ``<context-status>`` block showing CONTEXT_SUMMARIZE_AT of the window or more used becomes a call to that
        tool with no arguments; once a tool has run for the message, the later rules answer it."""
        if SUMMARIZE_CONTEXT_TOOL not in call.tool_names or call.tool_used or not call.messages:
            return None
        status = context_status(message_text(call.messages[-1]))
        if status is None or status[0] < CONTEXT_SUMMARIZE_AT * status[1]:
            return None
        return {"tool": SUMMARIZE_CONTEXT_TOOL, "input": {}}

    def _extraction_rule(self, call: _Call) -> dict[str, Any] | None:
        """Rule 2: the SDK's memory-extraction request gets a JSON array of the facts in the transcript's user lines."""
        last_user = next((m for m in reversed(call.messages) if m["role"] == "user"), None)
        if not is_extraction_request(last_user):
            return None
        return {"text": self._extraction(message_text(last_user))}

    def _remember_rule(self, call: _Call) -> dict[str, Any] | None:
        """Rule 3: "Please remember that I ..." while an ``add_memory`` tool is offered becomes a call to that tool
        with the sentences restated in the third person; once the tool has run, a confirmation (or the error).

        Without the tool, the message goes on to rule 4, which reads any statement in it as a fact.
        """
        if call.question_message is None or not (call.tool_used or ADD_TOOL_NAME in call.tool_names):
            return None
        to_remember = fact_rules.remember_request(call.question)
        if not to_remember:
            return None
        if not call.tool_used:
            return {"tool": ADD_TOOL_NAME, "input": {"entries": to_remember}}
        if _tool_failed(call.messages[call.messages.index(call.question_message) + 1 :]):
            return {"text": pick(self.voice.save_failed, call.question)}
        return {"text": pick(self.voice.saved, call.question).format(entries=" ".join(to_remember))}

    def _statement_rule(self, call: _Call) -> dict[str, Any] | None:
        """Rule 4: a message that is not a question (it does not end in "?") gets an acknowledgement repeating the
        facts it states, or a plain "Noted." when it states none."""
        if call.question_message is None or call.question.rstrip().endswith("?"):
            return None
        stated = fact_rules.statements(call.question)
        if not stated:
            return {"text": pick(self.voice.noted, call.question)}
        facts = _join([f"your {key} is {value}" for key, value in stated])
        return {"text": pick(self.voice.statement, call.question).format(facts=facts)}

    def _quote_rule(self, call: _Call) -> dict[str, Any] | None:
        """Rule 4b: "What did I say about the X?" gets the user's earlier sentences that name X, quoted as written,
        or says it cannot see any. Only user text counts, and every user message does, summaries included: the
        model cannot tell a summary from what the user wrote."""
        topic = fact_rules.said_about(call.question) if call.question_message is not None else None
        if topic is None:
            return None
        before = call.messages[: next(i for i, m in enumerate(call.messages) if m is call.question_message)]
        texts = [b["text"] for m in before if m["role"] == "user" for b in m["content"] if "text" in b]
        found = fact_rules.sentences_about(topic, texts)
        if not found:
            return {"text": pick(self.voice.unquoted, call.question).format(topic=topic)}
        quotes = " ".join(f'"{sentence}"' for sentence in found)
        return {"text": pick(self.voice.quoted, call.question).format(quotes=quotes)}

    def _question_rule(self, call: _Call) -> dict[str, Any] | None:
        """Rule 5: a question is answered from the latest visible statement of each key it asks about, and what the
        model cannot see it says it cannot see. When the answer is not visible and a ``search_memory`` tool is offered,
        the model first calls that tool (once) and then answers from its result."""
        if call.question_message is None:
            return None
        entries = [entry for text in call.message_texts for entry in _memory_entries(text)]
        asked = fact_rules.asked_keys(call.question)
        known = fact_rules.latest_facts(call.readable_texts) if asked else {}
        answers, missing = [], []
        for key in asked:
            found = fact_rules.match_key(key, known)
            if found is None:
                missing.append(key)
            else:
                answers.append(f"{_possessive(found)} is {known[found]}")

        if (missing or not asked) and not entries and SEARCH_TOOL_NAME in call.tool_names and not call.tool_used:
            return {"tool": SEARCH_TOOL_NAME, "input": {"query": call.question}}
        if asked:
            parts = []
            if answers:
                asked_text = _join([_possessive(k) for k in asked])
                parts.append(pick(self.voice.answer, call.question).format(
                    answers_sentence=_sentence(_join(answers)), answers=_join(answers), asked=asked_text))
            if missing:
                missing_text = _join([_possessive(k) for k in missing], "or")
                parts.append(pick(self.voice.missing, call.question).format(missing=missing_text))
            return {"text": " ".join(parts)}
        if entries:
            return {"text": pick(self.voice.from_memory, call.question).format(entry=entries[0])}
        return {"text": pick(self.voice.nothing, call.question)}

    def _extraction(self, request: str) -> str:
        """A JSON array of the durable facts in the user's lines of a transcript, as ModelExtractor asks."""
        found: list[str] = []
        for line in request.splitlines():
            if not line.startswith("user: "):
                continue
            text = line[len("user: ") :]
            found += fact_rules.remember_request(text)
            found += [self.voice.extracted.format(key=fact.key, value=fact.value)
                      for fact in fact_rules.statements(text)]
        return json.dumps([{"content": content} for content in dict.fromkeys(found)])

    def _summary(self, texts: list[str]) -> str:
        """A summary that keeps exactly the facts stated in the summarized messages."""
        known = fact_rules.latest_facts(texts)
        voice = self.voice
        facts = [voice.summary_fact.format(key=key, value=value) for key, value in known.items()]
        if voice.summary_reversed:
            facts.reverse()
        body = voice.summary_joiner.join(facts) if facts else voice.summary_none
        return "\n".join([voice.summary_title, body, voice.summary_count.format(count=len(texts))])

    # ------------------------------------------------------------------ the Model interface

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        *,
        tool_choice: Any = None,
        system_prompt_content: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """Answer one call as a Bedrock ConverseStream would, usage included; never touches the network."""
        if self.config.get("validate_requests"):
            from companion.models.converse_rules import ValidationException, violations

            found = violations(messages)
            if found:
                raise ValidationException(*found[0])
        input_tokens = await self.count_tokens(messages, tool_specs, system_prompt, system_prompt_content)  # type: ignore[arg-type]
        limit = self.config.get("overflow_at_tokens")
        if limit is not None and input_tokens > limit:
            raise ContextWindowOverflowException(
                f"Input is too long for the offline model: {input_tokens} tokens > overflow_at_tokens={limit}"
            )
        if system_prompt is None and system_prompt_content:
            system_prompt = "\n".join(b["text"] for b in system_prompt_content if "text" in b)
        reply = self.respond(messages, system_prompt, [spec["name"] for spec in tool_specs or []])

        yield {"messageStart": {"role": "assistant"}}
        if "tool" in reply:
            payload = json.dumps(reply["input"])
            tool_use_id = f"tooluse_offline_{len(messages)}"
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": tool_use_id, "name": reply["tool"]}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": payload}}}}
            yield {"contentBlockStop": {}}
            output_tokens = math.ceil(len(payload) / 2)
            stop_reason = "tool_use"
        else:
            yield {"contentBlockDelta": {"delta": {"text": reply["text"]}}}
            yield {"contentBlockStop": {}}
            output_tokens = math.ceil(len(reply["text"]) / 4)
            stop_reason = "end_turn"
        yield {"messageStop": {"stopReason": stop_reason}}
        # The offline model answers in well under a millisecond at the notebooks' sizes (benchmarks/offline_model.py
        # measures it). It reports 0 rather than the measured time, because the SDK writes latencyMs into every message
        # file: a measured 10 ms on a loaded machine would add a byte to a file size the notebooks print and compare.
        latency_ms = 0
        yield {
            "metadata": {
                "usage": {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "totalTokens": input_tokens + output_tokens,
                },
                "metrics": {"latencyMs": latency_ms},
            }
        }

    async def structured_output(
        self, output_model: type[T], prompt: Messages, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        """Fill the output model's fields from visible facts named like them; refuse when one is not visible."""
        texts = ([system_prompt] if system_prompt else []) + [message_text(m) for m in prompt]
        known = fact_rules.latest_facts(texts)
        values: dict[str, Any] = {}
        missing: list[str] = []
        for name, field in output_model.model_fields.items():
            found = fact_rules.match_key(fact_rules.normalise_key(name), known)
            if found is not None:
                values[name] = known[found]
            elif field.is_required():
                missing.append(name)
        if missing:
            raise ValueError(
                f"The offline model cannot see {', '.join(missing)} in this conversation, "
                f"so it cannot fill {output_model.__name__}."
            )
        yield {"output": output_model(**values)}
