"""The address ``make run`` prints: the user's own Session Memory Chat, made as Langflow's Templates dialog makes it.

A template lives in Langflow's owner-less "Starter Projects" folder, which the editor does
not open as the user's flow; picking it in the Templates dialog copies it into the user's
project. This does the same through Langflow's REST API, as the auto-login user the browser
becomes, once: a flow of that user's with the template's name is opened again, with whatever
the user changed in it. ``make run MODEL=...`` (``flow_model``) opens a copy of its own, named for the model
and with its Agent on it, so the copy on the template's model stays as it was.
"""

from copy import deepcopy

import httpx

from langflow_session_memory.flow_model import FlowModel
from langflow_session_memory.starter_flow import saved_flow

AGENT_TYPE = "SessionMemoryAgent"

# What the Templates dialog carries over from a template; Langflow gives the copy its id, owner and project.
COPIED_FIELDS = ("name", "description", "data", "icon", "icon_bg_color", "gradient", "tags")


class NoStarterFlow(Exception):
    """Why no address can be given (the user then picks the template by hand)."""


def copy_of(template: dict, model: FlowModel | None = None) -> dict:
    """The body of ``POST /api/v1/flows/`` that makes a user's flow from ``template`` (its copy for ``model``)."""
    body = {field: template[field] for field in COPIED_FIELDS if template.get(field) is not None}
    if model is not None:
        body |= {"name": copy_name(template["name"], model), "data": with_model(body["data"], model) or body["data"]}
    return body


def users_copy(flows: list[dict], name: str, template_id: str) -> dict | None:
    """The user's flow made from the template earlier (by name; the template itself is not the user's)."""
    return next((flow for flow in flows if flow.get("name") == name and flow.get("id") != template_id), None)


def copy_name(template_name: str, model: FlowModel | None) -> str:
    """The name of the user's copy: the template's, with the model's when it runs on another."""
    return template_name if model is None else f"{template_name} on {model.name}"


def with_model(data: dict, model: FlowModel) -> dict | None:
    """The flow's ``data`` with each Session Memory Agent on ``model``; None when every one already is."""
    changed = deepcopy(data)
    agents = [node for node in changed.get("nodes", []) if node.get("data", {}).get("type") == AGENT_TYPE]
    fields = [node["data"]["node"]["template"]["model"] for node in agents]
    if all(field.get("value") == model.input_value() for field in fields):
        return None
    for field in fields:
        field["value"] = model.input_value()
    return changed


def starter_flow_url(address: str, *, model: FlowModel | None = None, timeout_s: float = 60) -> str:
    """``address/flow/<id>`` of the auto-login user's Session Memory Chat (on ``model``: its copy for that model),
    made now if the user has none."""
    saved = saved_flow()
    template_id, name = saved["id"], copy_name(saved["name"], model)
    with httpx.Client(base_url=address, timeout=timeout_s) as http:
        login = http.get("/api/v1/auto_login")
        if login.status_code != httpx.codes.OK:
            raise NoStarterFlow(f"auto-login is off (HTTP {login.status_code}): log in and pick the template")
        http.headers["Authorization"] = f"Bearer {login.json()['access_token']}"
        mine = http.get("/api/v1/flows/", params={"remove_example_flows": True, "header_flows": True})
        flow = users_copy(mine.raise_for_status().json(), name, template_id)
        if flow is None:
            templates = http.get("/api/v1/flows/basic_examples/").raise_for_status().json()
            installed = next((t for t in templates if t["id"] == template_id), None)  # refreshed to the installed code
            if installed is None:
                raise NoStarterFlow("the template is missing (LANGFLOW_CREATE_STARTER_PROJECTS=false?)")
            flow = http.post("/api/v1/flows/", json=copy_of(installed, model)).raise_for_status().json()
    return f"{address}/flow/{flow['id']}"
