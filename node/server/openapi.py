"""The OpenAPI 3 description of gnomon's HTTP API, served at ``GET /openapi.json``."""

from __future__ import annotations

from typing import Any

from gnomon import __version__
from node.server.prom import openapi as prometheus


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


SPEC: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "gnomon HTTP API",
        "version": __version__,
        "description": (
            "SQL over HTTP (HoraeDB-compatible), InfluxDB line-protocol writes, health and "
            "Prometheus metrics. Errors are JSON objects with the HTTP status as `code` and a "
            "`message`."
        ),
    },
    "paths": {
        "/sql": {
            "post": {
                "summary": "Run one SQL statement",
                "description": (
                    "Queries (SELECT, SHOW, DESCRIBE, EXPLAIN) answer `rows`, one object per "
                    "row keyed by column name; timestamps are integer milliseconds since the "
                    "epoch and binary values arrays of byte values. With `format=arrow` (or "
                    "`Accept: application/vnd.apache.arrow.stream`) a query answers one Arrow "
                    "IPC stream instead, typed as the gRPC API types it. With `max_rows` in "
                    "the body a query answers at most that many rows and says how many it "
                    "had: `total_rows` in JSON, the `Gnomon-Total-Rows` header with Arrow. "
                    "Other statements answer `affected_rows`."
                ),
                "operationId": "sql",
                "parameters": [
                    {
                        "name": "format",
                        "in": "query",
                        "required": False,
                        "description": "`json` (the default) or `arrow`.",
                        "schema": {"type": "string", "enum": ["json", "arrow"]},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": "#/components/schemas/SqlRequest"},
                            "example": {"query": "SELECT * FROM demo WHERE name = 'a'"},
                        }
                    },
                },
                "responses": {
                    "200": {
                        "description": "The statement ran.",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "oneOf": [
                                        {"$ref": "#/components/schemas/SqlRows"},
                                        {"$ref": "#/components/schemas/SqlAffectedRows"},
                                    ]
                                }
                            },
                            "application/vnd.apache.arrow.stream": {
                                "schema": {"type": "string", "format": "binary"}
                            },
                        },
                    },
                    "400": _error_response("The statement or the request body is invalid."),
                    "404": _error_response("A table the statement names does not exist."),
                    "409": _error_response("The table already exists."),
                    "413": _error_response("The request body is larger than the limit."),
                    "500": _error_response("The statement failed inside the server."),
                },
            }
        },
        "/influxdb/v1/write": {
            "post": {
                "summary": "Write points in InfluxDB line protocol",
                "description": (
                    "One point per line: `measurement[,tag=value...] field=value[,...] "
                    "[timestamp]`. Each measurement is a table; missing tables are created "
                    "(tags as TAG string columns, fields typed by their values, timestamp "
                    "column `timestamp`) and missing columns added. Bodies may be gzip-encoded."
                ),
                "operationId": "influxdbWrite",
                "parameters": [
                    {
                        "name": "db",
                        "in": "query",
                        "required": False,
                        "description": "Database; gnomon has one, `public`.",
                        "schema": {"type": "string", "default": "public"},
                    },
                    {
                        "name": "precision",
                        "in": "query",
                        "required": False,
                        "description": "Unit of the timestamps in the body.",
                        "schema": {
                            "type": "string",
                            "enum": ["ns", "n", "us", "u", "ms", "s", "m", "h"],
                            "default": "ns",
                        },
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "text/plain": {
                            "schema": {"type": "string"},
                            "example": (
                                'cpu,host=a usage=0.5,state="ok",count=3i 1700000000000000000'
                            ),
                        }
                    },
                },
                "responses": {
                    "204": {"description": "All points were written."},
                    "400": _error_response("A line is malformed or does not fit its table."),
                    "413": _error_response("The request body is larger than the limit."),
                    "500": _error_response("The write failed inside the server."),
                },
            }
        },
        "/influxdb/v1/query": {
            method: {
                "summary": "Query in InfluxQL (InfluxDB 1.x)",
                "description": (
                    "SELECT (fields, tags, aggregates, GROUP BY time() and tags, fill()) and "
                    "SHOW MEASUREMENTS / TAG KEYS / FIELD KEYS, answered as InfluxDB 1.x's JSON. "
                    "POST may carry the parameters as a form body."
                ),
                "operationId": "influxdbQuery" + method.title(),
                "parameters": [
                    {
                        "name": "q",
                        "in": "query",
                        "required": True,
                        "description": "InfluxQL statements, separated by `;`.",
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "db",
                        "in": "query",
                        "required": False,
                        "description": "Database; gnomon has one, `public`.",
                        "schema": {"type": "string", "default": "public"},
                    },
                    {
                        "name": "epoch",
                        "in": "query",
                        "required": False,
                        "description": "Times as integers in this unit; RFC3339 strings without.",
                        "schema": {
                            "type": "string",
                            "enum": ["ns", "n", "u", "µ", "ms", "s", "m", "h"],
                        },
                    },
                ],
                "responses": {
                    "200": {
                        "description": "One result per statement: its series or its error.",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "400": _error_response("The query does not parse or asks the impossible."),
                },
            }
            for method in ("get", "post")
        },
        "/health": {
            "get": {
                "summary": "Liveness",
                "operationId": "health",
                "responses": {
                    "200": {
                        "description": "The server is serving.",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"status": {"type": "string"}},
                                }
                            }
                        },
                    },
                    "503": _error_response("The server is stopping or the engine is closed."),
                },
            }
        },
        "/route/{table}": {
            "get": {
                "summary": "Where a table is served",
                "description": "The endpoints of the node serving the table: its owner's in a "
                "cluster (any node answers), this node's in standalone.",
                "operationId": "route",
                "parameters": [
                    {"name": "table", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {
                        "description": "The table and the owner's endpoints by protocol.",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        name: {"type": "string"}
                                        for name in ("table", "grpc", "http", "flight")
                                    },
                                }
                            }
                        },
                    },
                    "404": _error_response("No such table."),
                    "503": _error_response("The table's shard has no serving node right now."),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Metrics in the Prometheus text format",
                "operationId": "metrics",
                "responses": {
                    "200": {
                        "description": "Request counts and latencies per endpoint, rows "
                        "written, memtable and flush figures.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/api/cluster": {
            "get": {
                "summary": "The cluster as the web console shows it",
                "description": "Data nodes (role, liveness, load, rows/s, memtable bytes, "
                "queries/s, CPU), shards (leader, followers and their lag, epoch, status), the "
                "procedures running and the compaction nodes: the meta service's view on a "
                "cluster node; the server itself and its tables on standalone. The console "
                "(`GET /dashboard`) refreshes its cluster page from it.",
                "operationId": "cluster",
                "responses": {
                    "200": {
                        "description": "The cluster's document.",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "mode": {"enum": ["standalone", "cluster"]},
                                        "me": {"type": "string"},
                                        **{
                                            name: {"type": "array", "items": {"type": "object"}}
                                            for name in (
                                                "nodes",
                                                "shards",
                                                "tables",
                                                "procedures",
                                                "compaction_nodes",
                                            )
                                        },
                                    },
                                }
                            }
                        },
                    },
                    "503": _error_response("The meta service cannot be reached."),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "operationId": "openapi",
                "responses": {
                    "200": {
                        "description": "The OpenAPI 3 description of the HTTP API.",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        **prometheus.PATHS,
    },
    "components": {
        "schemas": {
            "SqlRequest": {
                "type": "object",
                "required": ["query"],
                "properties": {
                    "query": {"type": "string", "description": "One statement."},
                    "max_rows": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "The most rows of a query's answer to send.",
                    },
                },
            },
            "SqlRows": {
                "type": "object",
                "required": ["rows"],
                "properties": {
                    "rows": {
                        "type": "array",
                        "items": {"type": "object", "additionalProperties": True},
                    },
                    "total_rows": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "With `max_rows`: the rows of the whole answer.",
                    },
                },
            },
            "SqlAffectedRows": {
                "type": "object",
                "required": ["affected_rows"],
                "properties": {"affected_rows": {"type": "integer", "minimum": 0}},
            },
            "Error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "integer", "description": "The HTTP status."},
                    "message": {"type": "string"},
                },
            },
        }
    },
}
