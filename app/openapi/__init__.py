"""The OpenAPI document and its pages: error responses routes declare, exact model schemas, offline Swagger UI."""

from app.openapi.document import SSE_EVENTS_OPT, body_one_of
from app.openapi.errors import ErrorBody, error_responses
from app.openapi.params import name_parameter

__all__ = ["SSE_EVENTS_OPT", "ErrorBody", "body_one_of", "error_responses", "name_parameter"]
