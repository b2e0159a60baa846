"""Drives azure-servicemanagement-legacy 0.20.8's SchedulerManagementService against the emulator (run in
its own venv, see tests/support/sdk_envs.py). Reads a plan on stdin: {host, ca, subscription_id, cert?: [certificate
PEM file, key PEM file] (the management certificate the session presents), calls: [{method, args, service?:
"management" for ServiceManagementService's subscription operations (management certificates)}]} and prints one
JSON line: [{ok, result} | {error: {type, status, message}}] per call, in order."""

from __future__ import annotations

import json
import sys

import requests
from azure.servicemanagement import SchedulerManagementService, ServiceManagementService


def plain(value):
    """Result objects as JSON: their attributes, recursively (lists stay lists)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "__iter__") and not hasattr(value, "__dict__"):
        return [plain(item) for item in value]
    items = {key: plain(item) for key, item in vars(value).items() if not key.startswith("_")}
    if hasattr(value, "__iter__"):
        items["items"] = [plain(item) for item in value]
    return items


def resolve(value, results):
    """Arguments as sent, with {"$from": index, "path": [...]} read from an earlier call's result."""
    if isinstance(value, list):
        return [resolve(item, results) for item in value]
    if isinstance(value, dict):
        if "$from" in value:
            node = results[value["$from"]]["result"]
            for key in value["path"]:
                node = node[key]
            return node
        return {key: resolve(item, results) for key, item in value.items()}
    return value


def main() -> None:
    plan = json.load(sys.stdin)
    session = requests.Session()
    session.verify = plan["ca"]
    session.trust_env = False  # else REQUESTS_CA_BUNDLE (set on many machines) replaces the CA above
    if plan.get("cert"):
        session.cert = tuple(plan["cert"])
    service = SchedulerManagementService(plan["subscription_id"], request_session=session, host=plan["host"])
    management = ServiceManagementService(plan["subscription_id"], request_session=session, host=plan["host"])
    results = []
    for call in plan["calls"]:
        try:
            client = management if call.get("service") == "management" else service
            answer = getattr(client, call["method"])(*resolve(call.get("args", []), results))
            results.append({"ok": True, "result": plain(answer)})
        except Exception as exc:  # noqa: BLE001 - every client error is a result to report
            status = getattr(exc, "status_code", None)
            results.append({"error": {"type": type(exc).__name__, "status": status, "message": str(exc)[:2000]}})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
