"""A long, chatty conversation with facts said in passing: what a real user's session looks like.

Two parties talk about the user's life across sittings (a user who chats, an assistant that
answers briefly). Each fact is said once, inside a chatty message ("Oscar, my guinea pig, chewed
through the charger cable again"), never as "The X of Y is Z."; one fact changes later. The
questions ask about a fact in other words than it was said in, the way a person asks ("What pet
do I have?" for "my guinea pig Oscar"), and name the words a right answer holds.

Pure and deterministic: the same messages for the same size, so a run with memory and a run of
the stock Agent replay the same session.
"""

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class ChattyFact:
    """A fact, the user's message that says it, the question about it, and the words a right answer holds."""

    said: str
    question: str
    expected: tuple[str, ...]
    stale: str | None = None  # for a changed fact: the old value, which a right answer does not give


# Each fact's message, and how the question asks about it. Some questions share a rare word with the message
# ("cello"), some only a meaning ("pet" for "guinea pig"): words alone find the first kind.
FACTS = (
    ChattyFact(
        "Ugh, Oscar chewed through my laptop charger again. Never get a guinea pig if you own cables, honestly.",
        "What kind of pet do I have, and what is its name?",
        ("guinea pig", "Oscar"),
    ),
    ChattyFact(
        "My sister Priya called last night from Lisbon, she says the trams there are always packed in summer.",
        "Which city does my sister live in?",
        ("Lisbon",),
    ),
    ChattyFact(
        "Big news: I finally bought a car! A used green Subaru Outback, 2016, it smells a bit like a wet dog.",
        "What car did I buy?",
        ("Subaru",),
    ),
    ChattyFact(
        "I signed up for cello lessons on Thursdays, my teacher Mr. Abernathy says my bowing is 'enthusiastic'.",
        "What instrument am I learning?",
        ("cello",),
    ),
    ChattyFact(
        "Our wedding anniversary is on June 9th, so I need to book somewhere nice before it's too late.",
        "When is my wedding anniversary?",
        ("June 9",),
    ),
    ChattyFact(
        "The band finally agreed on a name after three weeks of arguing: we're called Velvet Static now.",
        "What did my band decide to call itself?",
        ("Velvet Static",),
    ),
    ChattyFact(
        "My new manager is Rosalind, she seems strict but she brought homemade scones on her first day.",
        "Who is my manager?",
        ("Rosalind",),
    ),
    ChattyFact(
        "Careful with recipes for me by the way, I'm allergic to peanuts, even a trace makes my throat itch.",
        "What food am I allergic to?",
        ("peanut",),
    ),
    ChattyFact(
        "The book club picked The Dispossessed by Ursula Le Guin for next month, I've heard it's dense.",
        "Which book is my book club reading?",
        ("Dispossessed",),
    ),
    ChattyFact(
        "We moved into the new flat in Portland last weekend, the boxes are still everywhere.",
        "Which city do I live in now?",
        ("Denver",),
        stale="Portland",
    ),
)
# The change of the last fact, said well after it.
CHANGE = "Plot twist: the Portland job fell through, so we packed everything up again and now we live in Denver."

# Small talk: the words it is made of ("weekend", "work", "dinner") recur in hundreds of messages.
_SMALL_TALK = (
    "It rained all {day} so I stayed in and watched {show} with a big mug of tea.",
    "Work was long today, three meetings about the {topic} and none of them decided anything.",
    "I tried a new recipe for dinner, {dish}, and honestly it turned out better than expected.",
    "Went for a walk by the river this {day}, the weather was nice for once and the park was busy.",
    "I can't decide whether to repaint the kitchen {colour} or just leave it, what do you think?",
    "My neighbour's dog barked all night again, I barely slept and work tomorrow will be rough.",
    "Finished {show} finally, the ending was a bit rushed but I enjoyed the ride overall.",
    "We had friends over for dinner, I made {dish} and we played board games until midnight.",
    "The {topic} at work is behind schedule again, my weekend will probably go to it.",
    "Thinking of taking a short trip next month, somewhere quiet with good food and no meetings.",
)
_FILL = {
    "day": ("Monday", "Tuesday", "Saturday", "Sunday", "morning", "afternoon", "evening"),
    "show": ("the baking show", "a detective series", "an old sci-fi film", "a nature documentary"),
    "topic": ("budget review", "office move", "quarterly report", "new website", "hiring plan"),
    "dish": ("a lentil curry", "mushroom risotto", "roast vegetables", "a fish stew", "homemade pizza"),
    "colour": ("sage green", "pale yellow", "white", "navy blue"),
}
_REPLIES = (
    "That sounds like quite a day. How are you feeling about it?",
    "Nice! It's good to hear something went well.",
    "Oh no, that sounds tiring. I hope the rest of the week is calmer.",
    "Good idea. Let me know how it goes.",
    "That's fun. Anything else on your mind?",
    "Understood, I'll keep that in mind.",
)


@dataclass(frozen=True)
class ChattySession:
    """The stored conversation (sender, text) in order, and the questions asked after it."""

    messages: tuple[tuple[str, str], ...]
    questions: tuple[ChattyFact, ...]
    relevant: dict[str, tuple[str, ...]]  # question -> the messages that answer it (the oracle's)

    @property
    def newest_fact_age(self) -> int:
        """How many stored messages follow the newest message that says a fact (its change aside)."""
        said = {fact.said for fact in self.questions}
        newest = max(index for index, (_, text) in enumerate(self.messages) if text in said)
        return len(self.messages) - 1 - newest


def chatty_session(turns_before: int = 40, turns_after: int = 110, seed: int = 7) -> ChattySession:
    """``turns_before`` exchanges with the facts spread among them, then ``turns_after`` exchanges of small
    talk (the fact that changes changes in their first third): the facts end up more than
    ``2 * turns_after`` messages before the questions."""
    chooser = random.Random(seed)
    user_lines: list[str] = [_small_talk(chooser) for _ in range(turns_before)]
    for index, fact in enumerate(FACTS):
        user_lines[(index * turns_before) // len(FACTS) + 1] = fact.said
    later = [_small_talk(chooser) for _ in range(turns_after)]
    later[turns_after // 3] = CHANGE
    messages: list[tuple[str, str]] = []
    for line in [*user_lines, *later]:
        messages += [
            ("User", line),
            ("Machine", "Understood, I'll keep that in mind." if line in _FACT_LINES else chooser.choice(_REPLIES)),
        ]
    relevant = {fact.question: (fact.said,) for fact in FACTS}
    relevant[FACTS[-1].question] = (FACTS[-1].said, CHANGE)
    return ChattySession(messages=tuple(messages), questions=FACTS, relevant=relevant)


_FACT_LINES = frozenset([*(fact.said for fact in FACTS), CHANGE])


def _small_talk(chooser: random.Random) -> str:
    template = chooser.choice(_SMALL_TALK)
    return template.format(**{name: chooser.choice(values) for name, values in _FILL.items()})
