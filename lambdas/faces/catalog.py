"""Every protocol face the HTTP functions serve, in routing order (the broker and consumer handlers build
their resolvers from it)."""

from __future__ import annotations

from lambdas.common.face import Face
from lambdas.faces import cloudflare, native, openstreams, sqs, streams

FACES: tuple[Face, ...] = (native.FACE, cloudflare.FACE, streams.FACE, openstreams.FACE, sqs.FACE)
