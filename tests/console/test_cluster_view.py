"""``GET /api/cluster``'s document on a cluster node, from a stand-in meta client: nodes and
their figures, shards with their followers' lag, the procedures running (the shards each
holds, their kind and step from the meta service) and the compaction nodes."""

from __future__ import annotations

from typing import Any, cast

import pytest

from gnomon.errors import NotFound
from gnomon.proto import meta_pb2 as pb
from meta.model import FOLLOWER_LAG
from node.server.console import ClusterView

pytestmark = pytest.mark.unit

A, B, C = "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7041"


class Meta:
    def nodes(self) -> list[pb.NodeInfo]:
        return [
            pb.NodeInfo(
                name=A,
                kind=pb.DATA,
                live=True,
                load=2.0,
                leader_shards=2,
                follower_shards=1,
                heartbeat_age_s=1.5,
                figures={"rows_written_per_s": 1200.0, "memtable_bytes": 2.0**20},
            ),
            pb.NodeInfo(
                name=B,
                kind=pb.DATA,
                live=False,
                follower_shards=2,
                heartbeat_age_s=-1,
                figures={f"{FOLLOWER_LAG}0": 2.5},
            ),
            pb.NodeInfo(
                name=C, kind=pb.COMPACTION, live=True, figures={"running": 1.0, "slots": 2.0}
            ),
        ]

    def shards(self) -> list[pb.ShardInfo]:
        return [
            pb.ShardInfo(id=0, leader=A, followers=[B], epoch=3, status="busy", procedure=7),
            pb.ShardInfo(id=1, leader=A, followers=[B], epoch=1, status="busy", procedure=7),
            pb.ShardInfo(id=2, leader="", status="busy", procedure=8),
            pb.ShardInfo(id=3, leader=A, status="ready", pinned=True),
        ]

    def procedure(self, proc_id: int, wait_s: float = 0.0) -> pb.ProcedureInfo:
        if proc_id == 8:
            raise NotFound("no procedure 8")
        return pb.ProcedureInfo(id=7, kind="merge", status="running", step=2, params="{}")


def test_the_cluster_as_the_meta_service_sees_it() -> None:
    view = ClusterView(cast(Any, None), A, dict, meta=cast(Any, Meta()))
    doc = view()
    assert doc["mode"] == "cluster" and doc["me"] == A
    a, b = doc["nodes"]
    assert (a["name"], a["role"], a["live"]) == (A, "leader + follower", True)
    assert a["rows_per_s"] == 1200
    assert a["memtable_bytes"] == 2.0**20 and a["heartbeat_age_s"] == 1.5
    assert (b["role"], b["live"], b["heartbeat_age_s"], b["rows_per_s"]) == (
        "follower",
        False,
        None,
        None,
    )
    first = doc["shards"][0]
    assert first["followers"] == [{"name": B, "lag_s": 2.5}]
    assert (first["leader"], first["epoch"], first["status"]) == (A, 3, "busy")
    assert doc["shards"][2]["leader"] is None and doc["shards"][3]["pinned"] is True
    assert doc["procedures"] == [
        {"id": 7, "kind": "merge", "status": "running", "step": 2, "shards": [0, 1], "params": "{}"}
    ]
    [compaction] = doc["compaction_nodes"]
    assert (compaction["name"], compaction["running"], compaction["queued"]) == (C, 1.0, None)
