"""The "Session Memory Chat" starter flow among Langflow's templates, put there at every start.

Langflow 1.13 has no starter-project seam for an installed extension: ``extension.json``
rejects ``starterProjects``, and only manifest-less ``lfx.bundles`` folders may ship them.
Its templates are flows in the owner-less "Starter Projects" folder, which the Templates
dialog lists (``GET /api/v1/flows/basic_examples/``) and copies into the user's project
when picked. Langflow rewrites that folder early in each start, before the plugin's
lifespan runs; this then adds ours under a fixed id, its components refreshed to the
installed versions exactly as Langflow refreshes its own templates. A template is never
a user's flow, so nothing is overwritten that anyone edited. Like Langflow's own, it is
skipped with ``LANGFLOW_CREATE_STARTER_PROJECTS=false``.
"""

import json
from copy import deepcopy
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

STARTER_FLOW_FILE = Path(__file__).parent / "flows" / "session_memory_chat.json"


def saved_flow() -> dict:
    """The flow as kept in the package (also importable by hand: Langflow's "Upload a flow")."""
    return json.loads(STARTER_FLOW_FILE.read_text())


def current_flow(saved: dict, all_types: dict) -> dict:
    """``saved`` with each node's code (and Langflow's other refreshed parts) as installed; inputs added since kept."""
    from langflow.initial_setup.setup import update_projects_components_with_latest_component_versions
    from lfx.utils.component_aliases import flatten_components_with_aliases

    flow = deepcopy(saved)
    flow["data"] = update_projects_components_with_latest_component_versions(flow["data"], all_types)
    installed = flatten_components_with_aliases(all_types)
    for node in flow["data"]["nodes"]:
        if latest := installed.get(node["data"]["type"]):
            template = node["data"]["node"]["template"]
            added = {name: deepcopy(field) for name, field in latest["template"].items() if name not in template}
            template.update(added)
    return flow


async def install_starter_flow() -> str:
    """Create or refresh the template; returns what was done (``created``, ``updated`` or why it was ``skipped``)."""
    from langflow.initial_setup.setup import get_or_create_starter_folder
    from langflow.services.database.models.flow.model import Flow, FlowCreate
    from lfx.interface.components import component_cache
    from lfx.services.deps import get_settings_service, session_scope

    if not get_settings_service().settings.create_starter_projects:
        return "skipped reason=create_starter_projects_off"
    if not component_cache.all_types_dict:
        return "skipped reason=component_cache_empty"
    flow = current_flow(saved_flow(), component_cache.all_types_dict)
    async with session_scope() as session:
        folder = await get_or_create_starter_folder(session)
        fields = FlowCreate.model_validate({**flow, "id": None, "folder_id": folder.id}).model_dump(
            exclude={"id", "updated_at"}
        )
        fields["updated_at"] = datetime.now(UTC)
        if existing := await session.get(Flow, UUID(flow["id"])):
            existing.sqlmodel_update(fields)
            session.add(existing)
            return "updated"
        session.add(Flow.model_validate({**fields, "id": UUID(flow["id"])}))
        return "created"
