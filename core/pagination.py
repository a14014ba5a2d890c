"""Page-number pagination with a hard page_size cap and a typed error past it."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

from core.codes import ApiCode
from core.errors import DomainError


class InvalidPageSize(DomainError):
    code = ApiCode.INVALID_PAGE_SIZE


class Pagination(PageNumberPagination):
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None:
            try:
                size = int(raw)
            except ValueError:
                size = -1
            if not 1 <= size <= self.max_page_size:
                raise InvalidPageSize(
                    f"page_size must be an integer from 1 to {self.max_page_size}",
                    details={"page_size": raw, "max": self.max_page_size},
                )
            return size
        return self.page_size
