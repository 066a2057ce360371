def test_send_pull_ack_through_handlers(api, queue_name):
    status, body = api("POST", "/v1/queues", {"queue_name": queue_name})
    assert status == 201, body
    status, body = api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": {"n": 1}}]})
    assert status == 200, body
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 10})
    assert status == 200 and body["result"]["messages"][0]["body"] == {"n": 1}
    lease = body["result"]["messages"][0]["lease_id"]
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/ack", {"acks": [{"lease_id": lease}]})
    assert body["result"]["ackCount"] == 1
