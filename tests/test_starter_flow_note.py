"""The starter flow's canvas note: true wherever the template is opened, ``make run`` or a plain ``langflow run``."""

from langflow_session_memory.starter_flow import saved_flow


def canvas_note() -> str:
    (note,) = [node for node in saved_flow()["data"]["nodes"] if node["data"]["type"] == "note"]
    return note["data"]["node"]["description"]


def test_the_note_says_which_model_and_key_to_set_without_a_make_target_to_run():
    note = canvas_note()
    assert "gpt-5.4-mini" in note
    assert "OPENAI_API_KEY" in note
    assert "Model Providers" in note  # where Langflow's own settings take the key
    assert "make memory-show" not in note  # a pip-installed package has no Makefile
    assert "the bundled model server answers it" not in note  # only `make run` starts it
