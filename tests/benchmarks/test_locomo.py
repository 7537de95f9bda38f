"""``benchmarks.locomo``'s pure parts, so the real-model eval cannot rot between its runs (never a model here)."""

from datetime import UTC, datetime

from benchmarks import locomo


def test_a_conversation_loads_in_order_with_its_sittings_dates_and_questions_about_older_turns():
    conversation = locomo.load("26", 15)

    assert conversation.speakers == ("Caroline", "Melanie")
    assert len(conversation.turns) == 419
    assert conversation.turns[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert [turn.timestamp for turn in conversation.turns] == sorted(turn.timestamp for turn in conversation.turns)
    assert len(conversation.questions) == 15
    older = {turn.dia_id for turn in conversation.turns[: -locomo.OLDER_THAN]}
    assert all(set(question.evidence) <= older for question in conversation.questions)


def test_token_f1_is_squads():
    assert locomo.token_f1("The Lisbon marathon.", "lisbon marathon") == 1.0
    assert locomo.token_f1("I don't know", "Sweden") == 0.0
    assert round(locomo.token_f1("pottery and camping", "pottery, camping, painting"), 2) == 0.67


def test_the_report_has_a_row_per_configuration_and_question():
    conversation = locomo.load("30", 2)
    results = []
    for configuration in (*locomo.CONFIGURATIONS, locomo.ORACLE):
        result = locomo.Result(configuration, turn_seconds=[1.0, 2.0])
        result.answers = [question.answer for question in conversation.questions]
        result.quoted = [True, None] if configuration.session_memory else []
        results.append(result)

    report = locomo.section(results, [conversation], name="a model", seconds=60)

    assert report.count("| 30 | 369 | 2 |") == 3
    assert "| 1.00 | 100% | 1/2 |" in report
    assert all(question.text in report for question in conversation.questions)
