"""rag.curate.seedcheck: the drafter's checks with no model call, on passages of the kinds the hand reviews met."""

from rag.curate.seedcheck import foreign_scripts, lists_headings, names_its_passage, scripts

CONTENTS = ("## Table of Contents  1. Learning Philosophy and Scope 2. Mandatory Compliance and Onboarding Training "
            "3. The Professional Development Stipend (Certifications & Conferences) 4. Advanced Technology "
            "5. Formal Tuition Assistance Program (Degree Programs)  ---")
PROCEDURE = ("3. Edit the configuration 4. Flush changes and restart Docker     ```console    $ sudo systemctl "
             "daemon-reload    ``` 5. Verify 6. Done")
PROSE = ("## 3.1 Carryover 1. Employees may carry over forty (40) hours. 2. The rest is forfeited. 3. No payout. "
         "4. See Section 2.")


def test_a_contents_page_lists_headings_and_a_procedure_or_prose_does_not():
    assert lists_headings(CONTENTS)
    assert not lists_headings(PROCEDURE)  # code: a procedure's steps state what to do
    assert not lists_headings(PROSE)  # numbered, but its items are sentences
    assert not lists_headings("1. Purpose 2. Scope")  # too few headings to call it a contents page


def test_letters_of_a_script_the_passage_lacks_are_named():
    passage = "The organization operates on a Zero-Trust security model."
    assert foreign_scripts("It does not grant implicit访问 to databases.", passage) == ["CJK"]
    assert foreign_scripts("Это модель?", passage) == ["CYRILLIC"]
    assert foreign_scripts("What model does it use? 42 — “Zero-Trust”.", passage) == []  # digits, punctuation: no script
    assert foreign_scripts("Welches Modell gilt für Büros?", "Für alle Büros gilt das Zero-Trust-Modell.") == []
    assert foreign_scripts("什么模型?", "组织采用零信任安全模型。") == []  # a corpus in Chinese is checked against itself
    assert scripts("abc π 访") == {"LATIN", "GREEK", "CJK"}


def test_a_question_that_points_at_its_passage_is_named():
    assert names_its_passage("What types of prohibited harassment are mentioned in the passage?")
    assert names_its_passage("What does this excerpt say about eval()?")
    assert not names_its_passage("What does the pass statement do?")  # a word, not "the passage"
    assert not names_its_passage("Which passages of a book may an employee quote?")  # no pointer at its own
