"""For the Converse translation tests, AWS's own libraries as the oracle: botocore's service model of
bedrock-runtime validates every request built (its ParamValidator, as boto3 runs it before a call),
boto3's client serializes it (the JSON it would send must be the body the gateway sends), and boto3
parses a binary event stream made of the test's events (what the stream translator reads is what
boto3 reads)."""

import base64
import binascii
import copy
import json
import struct

import boto3
import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.validate import ParamValidator

SERVICE = botocore.session.get_session().get_service_model("bedrock-runtime")
BLOB_BLOCKS = ("image", "document", "audio", "video")
NOVA = "us.amazon.nova-pro-v1:0"


class Sent(Exception):
    """Raised by the before-send hook: the request was captured, nothing goes out."""

    def __init__(self, body):
        super().__init__("captured")
        self.body = body


def as_boto(req):
    """The request as boto3 takes it: the base64 of each content block's bytes as bytes."""
    params = copy.deepcopy(req)
    for turn in params.get("messages", []):
        for block in turn["content"]:
            for kind in BLOB_BLOCKS:
                source = block.get(kind, {}).get("source", {})
                if isinstance(source.get("bytes"), str):
                    source["bytes"] = base64.b64decode(source["bytes"], validate=True)
    return params


def valid_converse_request(req, model_id=NOVA):
    """`req`, after botocore has validated it against both operations' input shapes."""
    params = {"modelId": model_id, **as_boto(req)}
    for operation in ("Converse", "ConverseStream"):
        report = ParamValidator().validate(params, SERVICE.operation_model(operation).input_shape)
        assert not report.has_errors(), report.generate_report()
    return req


def client():
    return boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="y")


def boto3_body(req, model_id=NOVA):
    """The JSON body boto3 sends for converse_stream(**req), captured before it leaves."""
    bedrock = client()

    def capture(request, **_):
        raise Sent(json.loads(request.body))

    bedrock.meta.events.register("before-send.bedrock-runtime.ConverseStream", capture)
    try:
        bedrock.converse_stream(modelId=model_id, **as_boto(req))
    except Sent as sent:
        return sent.body
    raise AssertionError("nothing was sent")


def valid_event(event_type, payload):
    """`payload`, after botocore has validated it against the ConverseStream event's own shape."""
    stream = SERVICE.operation_model("ConverseStream").output_shape.members["stream"]
    report = ParamValidator().validate(payload, stream.members[event_type])
    assert not report.has_errors(), report.generate_report()
    return payload


def _header(name, value):
    encoded = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(encoded)) + encoded


def event_message(event_type, payload, *, exception=False):
    """One message of AWS's binary event stream (prelude, headers, JSON payload, CRCs)."""
    kind = "exception" if exception else "event"
    headers = (_header(":event-type" if not exception else ":exception-type", event_type)
               + _header(":content-type", "application/json") + _header(":message-type", kind))
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


class _Raw:
    def __init__(self, data):
        self.data = data

    def stream(self, **_):
        yield self.data


def boto3_stream(events):
    """The events boto3's converse_stream yields when the server sends `events` ((type, payload) pairs,
    a type ending in "Exception" sent as an exception), as (type, payload) pairs."""
    bedrock = client()
    data = b"".join(event_message(kind, payload, exception=kind.endswith("Exception")) for kind, payload in events)

    def answer(request, **_):
        headers = {"content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": "r"}
        return AWSResponse(request.url, 200, headers, _Raw(data))

    bedrock.meta.events.register("before-send.bedrock-runtime.ConverseStream", answer)
    reply = bedrock.converse_stream(modelId=NOVA, messages=[{"role": "user", "content": [{"text": "hi"}]}])
    return [next(iter(event.items())) for event in reply["stream"]]
