"""Scripted conversations from data/conversations: plant facts, talk about other things, ask at the end.

Every notebook that measures forgetting replays the same script, so their numbers can be compared.
"""

from __future__ import annotations

import json
from itertools import cycle, islice
from typing import Any

from companion.support.paths import data_path

DATA_DIR = data_path("conversations")


def load_script(name: str) -> dict[str, Any]:
    """One script by name (a file in data/conversations/), e.g. "codename"."""
    path = DATA_DIR / f"{name}.json"
    if not path.is_file():
        choices = sorted(p.stem for p in DATA_DIR.glob("*.json"))
        raise ValueError(f"No conversation script named {name!r}; the scripts are: {', '.join(choices)}")
    return json.loads(path.read_text(encoding="utf-8"))


def scripted_turns(name: str, turns: int, **values: Any) -> list[str]:
    """The user prompts of a `turns`-turn conversation: the plants, as many filler turns as fit, then the question.

    Placeholders such as {codename} are filled from `values`.
    """
    script = load_script(name)
    plants = script.get("plants") or [script["plant"]]
    if not isinstance(turns, int) or turns < len(plants) + 1:
        raise ValueError(
            f"The {name!r} script needs at least {len(plants) + 1} turns "
            f"({len(plants)} to plant, 1 to ask); got {turns!r}."
        )
    try:
        planted = [plant.format(**values) for plant in plants]
        question = script["question"].format(**values)
    except KeyError as missing:
        raise ValueError(f"The {name!r} script needs a value for {missing}.") from None
    filler = list(islice(cycle(script["filler"]), turns - len(plants) - 1))
    for key, value in values.items():
        said = [turn for turn in filler + [question] if str(value) in turn]
        if said:
            raise ValueError(f"{key} {value!r} occurs in a turn that should not state it: {said[0]!r}. "
                             f"Choose a {key} that is not a word of the script.")
    return planted + filler + [question]
