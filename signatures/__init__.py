"""Sieve's DSPy signatures, one per module. Docstrings are the instructions; optimizers rewrite them."""

from signatures.answerer import Answerer
from signatures.category import CategoryChooser
from signatures.condenser import FollowUpCondenser
from signatures.critic import GroundingCritic
from signatures.expander import Expander
from signatures.grader import Grader
from signatures.hyde import HypotheticalPassage
from signatures.item_reviewer import ItemReviewer
from signatures.judge import Judge
from signatures.pool_labeler import PoolLabeler
from signatures.question_drafter import QuestionDrafter
from signatures.reranker import Reranker
from signatures.rewriter import Rewriter
from signatures.source_router import SourceRouter
from signatures.sql_writer import SQLWriter
from signatures.unanswerable_drafter import UnanswerableDrafter
from signatures.vague_drafter import VagueQuestionDrafter

__all__ = ["Answerer", "CategoryChooser", "Expander", "FollowUpCondenser", "Grader", "GroundingCritic", "HypotheticalPassage",
           "ItemReviewer", "Judge", "PoolLabeler", "QuestionDrafter", "Reranker", "Rewriter", "SQLWriter", "SourceRouter",
           "UnanswerableDrafter", "VagueQuestionDrafter"]
