"""The core's public API: the one surface the faces (the CLI, the MCP server, the admin page, the HTTP edge)
import, besides `settings` for loading a config. Everything else in the package is the core's own business:
a face that cannot import an inner module cannot re-decide what it decides (tests/test_architecture.py
keeps it so).

Names load on first use, so `mcp-kb --help` and a server's start import only what they touch; the
`TYPE_CHECKING` block gives the type checker the same names (`X as X`: re-exported) (tests/test_exported_members.py checks that the
two lists agree).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .app import App as App
    from .view import CallerView as CallerView
    from .access import Gatekeeper as Gatekeeper
    from .access import Grant as Grant
    from .access import Identity as Identity
    from .access import RateLimits as RateLimits
    from .access import Refused as Refused
    from .audit import AuditTrail as AuditTrail
    from .audit import callers as callers
    from .errors import AuditUnavailable as AuditUnavailable
    from .errors import KBError as KBError
    from .errors import ConfigError as ConfigError
    from .errors import ParseError as ParseError
    from .errors import ModelError as ModelError
    from .errors import StoreError as StoreError
    from .errors import SyncBusyError as SyncBusyError
    from .errors import SyncCancelled as SyncCancelled
    from .errors import MassDeleteError as MassDeleteError
    from .errors import SearchError as SearchError
    from .errors import VersionError as VersionError
    from .kept_versions import KBVersion as KBVersion
    from .imports import import_leaving_out as import_leaving_out
    from .errors import NotSyncedError as NotSyncedError
    from .evaluation import format_self_checks as format_self_checks
    from .evaluation import format_table as format_table
    from .evaluation import load_qrels as load_qrels
    from .evaluation import load_queries as load_queries
    from .evaluation import load_reviewed_log as load_reviewed_log
    from .live import LiveSync as LiveSync
    from .live import SyncRunner as SyncRunner
    from .live import keep_in_sync as keep_in_sync
    from .models import fetch_models as fetch_models
    from .models import model_source as model_source
    from .models import prepare_model_runtimes as prepare_model_runtimes
    from .passages import Hit as Hit
    from .present import browse_text as browse_text
    from .present import cited_text as cited_text
    from .present import stale_line as stale_line
    from .present import read_text as read_text
    from .present import versions_text as versions_text
    from .present import sync_text as sync_text
    from .records import Pending as Pending
    from .records import Glance as Glance
    from .records import recorded_now as recorded_now
    from .records import pace as pace
    from .records import NEVER_SYNCED as NEVER_SYNCED
    from .records import HealthCheck as HealthCheck
    from .records import KBCheck as KBCheck
    from .records import KBStats as KBStats
    from .records import KBStatus as KBStatus
    from .records import LastSyncFigures as LastSyncFigures
    from .records import Problem as Problem
    from .records import Progress as Progress
    from .records import SearchFigures as SearchFigures
    from .records import SyncBrief as SyncBrief
    from .records import SyncHistory as SyncHistory
    from .records import SyncProgress as SyncProgress
    from .records import SyncReport as SyncReport
    from .read_outputs import BrowseOutput as BrowseOutput
    from .read_outputs import DocumentEntry as DocumentEntry
    from .read_outputs import OutlineEntry as OutlineEntry
    from .read_outputs import ReadOutput as ReadOutput
    from .requests import FILTER_SYNTAX as FILTER_SYNTAX
    from .requests import MAX_CHUNK_INDEX as MAX_CHUNK_INDEX
    from .requests import BrowseRequest as BrowseRequest
    from .requests import ListingOrder as ListingOrder
    from .requests import READ_TOKENS_MAX as READ_TOKENS_MAX
    from .requests import BROWSE_LIMIT_MAX as BROWSE_LIMIT_MAX
    from .requests import ReadRequest as ReadRequest
    from .requests import ResolvedSearch as ResolvedSearch
    from .requests import SearchRequest as SearchRequest
    from .requests import SyncRequest as SyncRequest
    from .requests import described as described
    from .requests import option_help as option_help
    from .requests import parse_filters as parse_filters
    from .requests import parse_search as parse_search
    from .requests import parse_request as parse_request
    from .requests import request_errors as request_errors
    from .requests import unknown_filter_field as unknown_filter_field
    from .schema import BUILTIN_FILTERS as BUILTIN_FILTERS
    from .schema import FIELD_TYPES as FIELD_TYPES
    from .schema import RANGE_OPERATORS as RANGE_OPERATORS
    from .schema import FieldType as FieldType
    from .search import SearchOutput as SearchOutput
    from .search import common_filter_types as common_filter_types
    from .search import ACROSS_KBS as ACROSS_KBS
    from .search import SearchResult as SearchResult
    from .text import as_sentence as as_sentence
    from .text import is_number as is_number
    from .text import printable as printable
    from .vocabulary import CITATION_FORMAT as CITATION_FORMAT
    from .vocabulary import DOCUMENT_URI as DOCUMENT_URI
    from .vocabulary import LIST_URI as LIST_URI
    from .vocabulary import LOOPBACK as LOOPBACK
    from .vocabulary import METRICS_URI as METRICS_URI
    from .vocabulary import STATUS_URI as STATUS_URI
    from .vocabulary import SYNC_TOOL as SYNC_TOOL
    from .vocabulary import LIST_TOOL as LIST_TOOL
    from .vocabulary import READ_TOOL as READ_TOOL
    from .vocabulary import SEARCH_ALL_TOOL as SEARCH_ALL_TOOL
    from .vocabulary import WORKBENCH_TOOLS as WORKBENCH_TOOLS
    from .vocabulary import SYNC_WORK_KEPT as SYNC_WORK_KEPT
    from .vocabulary import citation_marker as citation_marker
    from .vocabulary import document_uri as document_uri
    from .vocabulary import remember_invocation as remember_invocation
    from .vocabulary import sync_named as sync_named
    from .vocabulary import rebuild_option as rebuild_option
    from .vocabulary import work_kept as work_kept
    from .vocabulary import status_uri as status_uri
    from .vocabulary import sync_remedy as sync_remedy
    from .webhooks import HOOK_BODY_MAX as HOOK_BODY_MAX
    from .webhooks import HookOutcome as HookOutcome
    from .webhooks import HookTarget as HookTarget
    from .webhooks import RecentDeliveries as RecentDeliveries
    from .webhooks import Verdict as Verdict
    from .webhooks import hook_target as hook_target
    from .webhooks import receive_delivery as receive_delivery

# Each public name → the module that defines it.
_HOMES = {
    "App": "app",
    "CallerView": "view",
    "Gatekeeper": "access",
    "Grant": "access",
    "Identity": "access",
    "RateLimits": "access",
    "Refused": "access",
    "AuditTrail": "audit",
    "callers": "audit",
    "AuditUnavailable": "errors",
    "KBError": "errors",
    "ConfigError": "errors",
    "ParseError": "errors",
    "ModelError": "errors",
    "StoreError": "errors",
    "SyncBusyError": "errors",
    "SyncCancelled": "errors",
    "MassDeleteError": "errors",
    "SearchError": "errors",
    "VersionError": "errors",
    "KBVersion": "kept_versions",
    "import_leaving_out": "imports",
    "NotSyncedError": "errors",
    "format_self_checks": "evaluation",
    "format_table": "evaluation",
    "load_qrels": "evaluation",
    "load_queries": "evaluation",
    "load_reviewed_log": "evaluation",
    "LiveSync": "live",
    "SyncRunner": "live",
    "keep_in_sync": "live",
    "fetch_models": "models",
    "model_source": "models",
    "prepare_model_runtimes": "models",
    "Hit": "passages",
    "browse_text": "present",
    "cited_text": "present",
    "read_text": "present",
    "stale_line": "present",
    "versions_text": "present",
    "sync_text": "present",
    "Glance": "records",
    "Pending": "records",
    "recorded_now": "records",
    "pace": "records",
    "NEVER_SYNCED": "records",
    "HealthCheck": "records",
    "KBCheck": "records",
    "KBStats": "records",
    "KBStatus": "records",
    "LastSyncFigures": "records",
    "Problem": "records",
    "Progress": "records",
    "SearchFigures": "records",
    "SyncBrief": "records",
    "SyncHistory": "records",
    "SyncProgress": "records",
    "SyncReport": "records",
    "BrowseOutput": "read_outputs",
    "DocumentEntry": "read_outputs",
    "OutlineEntry": "read_outputs",
    "ReadOutput": "read_outputs",
    "FILTER_SYNTAX": "requests",
    "MAX_CHUNK_INDEX": "requests",
    "BrowseRequest": "requests",
    "ListingOrder": "requests",
    "READ_TOKENS_MAX": "requests",
    "BROWSE_LIMIT_MAX": "requests",
    "ReadRequest": "requests",
    "ResolvedSearch": "requests",
    "SearchRequest": "requests",
    "SyncRequest": "requests",
    "described": "requests",
    "option_help": "requests",
    "parse_filters": "requests",
    "parse_search": "requests",
    "parse_request": "requests",
    "request_errors": "requests",
    "unknown_filter_field": "requests",
    "BUILTIN_FILTERS": "schema",
    "FIELD_TYPES": "schema",
    "RANGE_OPERATORS": "schema",
    "FieldType": "schema",
    "SearchOutput": "search",
    "common_filter_types": "search",
    "ACROSS_KBS": "search",
    "SearchResult": "search",
    "as_sentence": "text",
    "is_number": "text",
    "printable": "text",
    "CITATION_FORMAT": "vocabulary",
    "DOCUMENT_URI": "vocabulary",
    "LIST_URI": "vocabulary",
    "LOOPBACK": "vocabulary",
    "METRICS_URI": "vocabulary",
    "STATUS_URI": "vocabulary",
    "SYNC_TOOL": "vocabulary",
    "LIST_TOOL": "vocabulary",
    "READ_TOOL": "vocabulary",
    "SEARCH_ALL_TOOL": "vocabulary",
    "WORKBENCH_TOOLS": "vocabulary",
    "SYNC_WORK_KEPT": "vocabulary",
    "citation_marker": "vocabulary",
    "document_uri": "vocabulary",
    "remember_invocation": "vocabulary",
    "sync_named": "vocabulary",
    "rebuild_option": "vocabulary",
    "work_kept": "vocabulary",
    "status_uri": "vocabulary",
    "sync_remedy": "vocabulary",
    "HOOK_BODY_MAX": "webhooks",
    "HookOutcome": "webhooks",
    "HookTarget": "webhooks",
    "RecentDeliveries": "webhooks",
    "Verdict": "webhooks",
    "hook_target": "webhooks",
    "receive_delivery": "webhooks",
}
__all__ = [*_HOMES, "__version__"]


def lazy_names(module: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module's `__getattr__` that imports each of its public names from its home (a module of this package)
    on first use; the next lookup is a plain attribute."""

    def attribute(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(import_module(f".{homes[name]}", "mcp_kb"), name)
        setattr(sys.modules[module], name, value)
        return value

    return attribute


__getattr__ = lazy_names(__name__, _HOMES)
