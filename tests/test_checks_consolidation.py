"""Notebook 15's checks (companion/checks/consolidation.py), each shown failing on a broken copy of the recorded run;
a real model's run, on which the checks that read its summaries with a regex are skipped; and a threshold set by hand,
on which the check about the chosen threshold is skipped."""

from __future__ import annotations

import copy

from checks_harness import check_suite

from companion.checks import consolidation


def rec(record, when, content, user="ada"):
    return next(r for r in record[when] if r["content"] == content and r["user"] == user)


def ended(record):
    return [r for r in record["after"] if r["user"] == "ada" and r["valid_until"] is not None]


def summary_record(record):
    return next(r for r in record["after"] if r["source"] == "model summary")


def lisbon_still_current(record):
    lisbon = record["after"][0]
    lisbon.update(valid_until=None, superseded_by=None)


def no_restatement_in_tuning(record):
    said = {m["content"] for m in record["history"]}
    record["pairs"]["tuning"] = [p for p in record["pairs"]["tuning"] if not {p["a"], p["b"]} <= said]


def nothing_ended(record):
    for r in ended(record):
        r.update(valid_until=None, superseded_by=None)


def repeats_after(record):
    record["reads"]["after"] = copy.deepcopy(record["reads"]["before"])


BREAKAGES = {
    # a threshold picked by something other than tuning accuracy
    "no threshold decides more tuning pairs right than the chosen one (each text embedded alone)":
        lambda r: r.update(chosen=0.5),
    # a held-out accuracy printed as the tuning one
    "the printed accuracies, tuning and held-out, recomputed with each text embedded alone":
        lambda r: r["shown"]["accuracy"].update({"held-out": r["shown"]["accuracy"]["tuning"]}),
    # a held-out set that took in a tuning pair
    "no held-out pair is a tuning pair": lambda r: r["pairs"]["held-out"].append(dict(r["pairs"]["tuning"][0])),
    "most of the history's restatement pairs are tuning pairs word for word": no_restatement_in_tuning,
    # a job that merged the old city's records but left one current
    "after the job no current memory states an outdated value, and each newest value is current":
        lisbon_still_current,
    "every ended memory names what replaced it, leading to a current memory":
        lambda r: ended(r)[0]["replaced_by"].update(id="m099"),
    # a lineage that names the wrong rule
    "every ended memory names the rule that replaced it (recomputed here)":
        lambda r: next(x for x in ended(r) if x["replaced_by"]["rule"] == "newest member")["replaced_by"].update(
            rule="model summary"),
    # a job that deleted the duplicate it ended
    "nothing was deleted: every record before the job is in the file after, with its text":
        lambda r: r["after"].remove(rec(r, "after", "The user's home city is Lisbon.")),
    "the job leaves every other user's memories as they were":
        lambda r: next(x for x in r["after"] if x["user"] != "ada").update(content="The user's home city is Cork."),
    # a cluster summarised twice
    "the model was asked once per cluster": lambda r: r["summaries"].append(dict(r["summaries"][0])),
    # the job wrote a text the model did not say
    "a memory written from a summary states what its own cluster's reply stated":
        lambda r: summary_record(r).update(content="The user's team is search."),
    # a reply that lost the team's fact, kept anyway
    "a summary is kept only when it states every fact its members state":
        lambda r: next(s for s in r["summaries"] if "payments" in s["reply"]).update(
            reply="* No facts about the user were stated."),
    "the steps table shows the text source the file records for each merge":
        lambda r: next(s for s in r["shown"]["steps"] if s["source"] == "newest member").update(
            source="model summary"),
    # a merge whose parents state two facts
    "no merge joined two facts, by fact label":
        lambda r: rec(r, "before", "The user has a peanut allergy.").update(fact="allergy-penicillin"),
    "the job leaves fewer current memories": nothing_ended,
    # an index that kept a duplicate text twice
    "each index holds one row per distinct current memory: identical texts share a row":
        lambda r: r["index_rows"].update(before=r["index_rows"]["before"] + 1),
    # a table that counted every record, ended ones too
    "the table's memories and index rows are the files' and the indexes'":
        lambda r: r["shown"]["rows"][1].update({"current memories": len([x for x in r["after"] if x["user"] == "ada"])}),
    # an index that lost what the questions ask for
    "recall@1 and @3 on held-out questions do not fall":
        lambda r: r["answer_ranks"].update(after=[None] * len(r["answer_ranks"]["after"])),
    # a table whose count does not match its rate
    "recall by the answer's word equals the table's recall by fact label, counts and rates":
        lambda r: r["shown"]["rows"][1].update({"answered@1": 16}),
    # an index that still held the old city
    "outdated values injected: some before, none after, as the table says (history labels)":
        lambda r: r["reads"]["after"][0]["entries"].append("The user's home city is Lisbon."),
    "fewer injected entries repeat a fact the call already has": repeats_after,
    "every call received five entries, before and after": lambda r: r["reads"]["after"][0]["entries"].pop(),
    # a history whose calls were already clean: the hook's "most calls" would not hold
    "before the job, most calls received an outdated value or a fact twice":
        lambda r: r["reads"].update(before=copy.deepcopy(r["reads"]["after"])),
    # a merged fact still injected twice in one call
    "the repeats left after the job are restatements it left as two memories":
        lambda r: r["reads"]["after"][0]["entries"].extend(["The user's team is payments."] * 2),
}

VARIANTS = {
    "a real model": lambda r: r.update(offline_rules=False),
    "a threshold set by hand": lambda r: r.update(chosen_by_hand=True),
}

globals().update(check_suite(consolidation, "15_consolidation", BREAKAGES, VARIANTS))


def test_the_calls_plot_colours_each_entry_by_the_history_labels():
    """`calls_plot`'s kinds, on a call of the recorded run's shape: an outdated value first, then a repeat of the
    asked fact, then another fact; and the outdated values are the three the history changed."""
    from companion.measure import consolidation_eval as evaluation

    outdated = evaluation.outdated_labels()
    assert outdated == {"city-lisbon", "editor-vim", "language-python"}
    by_text = {"Lisbon.": {"city-lisbon"}, "Porto.": {"city-porto"}, "Porto!": {"city-porto"}, "CET.": {"timezone-cet"}}
    kinds = evaluation.entry_kinds(["Lisbon.", "Porto.", "Porto!", "CET."], by_text, "city-porto", outdated)
    assert kinds == ["outdated value", "the asked fact", "repeat", "another fact"]
