"""The companion code behind notebook 12's Notes, off its lesson path since the second cold read, still tested: what
S3 requests cost (note 6: `load_run.request_cost_rows`) and the bounded retries of `local_aws.client_config` (note 8:
a closed port fails after 3 attempts, a missing bucket after 1, and neither creates anything)."""

from __future__ import annotations

import pytest

from companion.sessions.load_run import PRICES, request_cost_rows
from companion.sessions.local_aws import (
    MAX_ATTEMPTS,
    LocalEndpoint,
    boto_session,
    client_config,
    closed_port_url,
    make_client,
    short_error,
)


def test_request_costs_scale_the_run_to_a_thousand_users_at_the_listed_prices():
    rows = {row["item"]: row for row in request_cost_rows({"GetObject": 100, "PutObject": 1150}, users=50)}
    assert set(rows) == {"S3 GetObject", "S3 PutObject"}, "requests only: no storage row"
    put = rows["S3 PutObject"]
    assert put["per 1,000 users per day"] == 23000
    assert put["USD per day"] == pytest.approx(23000 / 1000 * PRICES["s3_put_list_per_1000"])
    assert rows["S3 GetObject"]["USD per day"] == pytest.approx(2000 / 1000 * PRICES["s3_get_other_per_1000"])


def attempts(client, call):
    seen = {"n": 0}
    client.meta.events.register("before-send.s3", lambda **_: seen.__setitem__("n", seen["n"] + 1))
    with pytest.raises(Exception) as error:  # noqa: PT011 - the digest below says which
        call(client)
    return seen["n"], short_error(error.value)


def test_a_closed_port_fails_after_the_bounded_attempts_and_a_missing_bucket_at_once():
    with LocalEndpoint() as local:
        s3 = make_client("s3", local)
        s3.create_bucket(Bucket="notes-12")
        url = closed_port_url()
        closed = boto_session(local).client("s3", endpoint_url=url, config=client_config(local=True))
        tries, text = attempts(closed, lambda c: c.head_bucket(Bucket="notes-12"))
        assert tries == MAX_ATTEMPTS == 3 and text.startswith("EndpointConnectionError"), text
        tries, text = attempts(s3, lambda c: c.get_object(Bucket="notes-12-missing", Key="x"))
        assert tries == 1 and "NoSuchBucket on GetObject" in text, text
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["notes-12"], "nothing created"
