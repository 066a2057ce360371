"""`sluice local` serves the API through the SnapStart alias the template defines: each route goes to
the function its integration -> alias resolves to, and those containers start as restored ones (the
before-snapshot and after-restore hooks ran before their first event); $LATEST containers do not."""

from __future__ import annotations

import botocore.session
import pytest

from sluice import constants as c
from sluice.client import SluiceClient
from sluice.local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e
TOKEN = "snapstart-e2e-token"
HOOKS = {"reseed_random", "drop_shared_state"}


@pytest.fixture(scope="module")
def runtime():
    rt = LocalRuntime(
        port=0,
        admin_token=TOKEN,
        stage="lsnap",
        concurrency={c.FN_BROKER: 1, c.FN_CONSUMER: 1},
        async_concurrency={c.FN_CONSUMER: 1},
        run_schedules=False,
        ttl_sweep_seconds=None,
    )
    rt.start()
    yield rt
    rt.stop()


def test_routes_resolve_through_the_alias_to_their_function(runtime: LocalRuntime) -> None:
    for route in c.ROUTES:
        target = runtime.api_targets[route.route_key]
        assert (target.function, target.alias) == (route.function, c.API_ALIAS)
    for name in c.API_FUNCTIONS:
        assert runtime.pools[name].config.alias == c.API_ALIAS
        assert runtime.pools[name].config.restores_from_snapshot


def test_requests_are_served_by_restored_containers(runtime: LocalRuntime) -> None:
    client = SluiceClient(runtime.url, TOKEN, max_attempts=1)
    client.create_queue("snap-orders")
    sent = client.send("snap-orders", {"order": 1})  # keyed: the idempotency layer built after restore
    pulled = client.pull("snap-orders", batch_size=1)
    assert [m.id for m in pulled.messages] == sent["message_ids"]
    assert pulled.messages[0].body == {"order": 1}
    client.ack("snap-orders", [pulled.messages[0].lease_id])
    for name in c.API_FUNCTIONS:
        (hooks,) = runtime.pools[name].restore_hooks()
        assert hooks is not None and set(hooks) >= HOOKS, (name, hooks)


def test_async_latest_containers_start_without_the_snapshot(runtime: LocalRuntime) -> None:
    pool = runtime._async_pool(c.FN_CONSUMER)
    assert pool.config.alias is None and not pool.config.restores_from_snapshot
    pool.warm()
    assert pool.restore_hooks() == [None]


def test_push_invocations_start_the_consumer_alias_from_the_snapshot(runtime: LocalRuntime) -> None:
    """The coordinator names the consumer as the stack does (`consumer:live`): the local Invoke API
    runs that on containers restored from the snapshot, and refuses an alias the template lacks."""
    qualified = runtime._env[c.ENV_CONSUMER_FUNCTION]
    assert qualified == f"{c.FN_CONSUMER}:{c.API_ALIAS}"
    lambda_api = botocore.session.get_session().create_client(
        "lambda",
        region_name="us-east-1",
        endpoint_url=runtime.url,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    answer = lambda_api.invoke(FunctionName=qualified, InvocationType="Event", Payload=b"{}")
    assert answer["StatusCode"] == 202
    pool = runtime._async_pool(c.FN_CONSUMER, c.API_ALIAS)
    assert pool.config.alias == c.API_ALIAS and pool.config.restores_from_snapshot
    pool.warm()
    (hooks,) = pool.restore_hooks()
    assert hooks is not None and set(hooks) >= HOOKS
    with pytest.raises(lambda_api.exceptions.ResourceNotFoundException):
        lambda_api.invoke(FunctionName=f"{c.FN_CONSUMER}:old", InvocationType="Event", Payload=b"{}")
