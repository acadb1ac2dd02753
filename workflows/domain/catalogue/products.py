"""Product tools: the catalogue of product types and each product's variants."""

from __future__ import annotations

from pydantic import Field

from workflows.domain.catalogue import folds
from workflows.domain.catalogue.spec import Scope, ToolArgs, ToolClass, ToolSpec


class GetProductDetailsArgs(ToolArgs):
    product_id: str = Field(min_length=1, max_length=100)


class ListAllProductTypesArgs(ToolArgs):
    pass


class GetItemDetailsArgs(ToolArgs):
    item_id: str = Field(min_length=1, max_length=100)


POSITION = 40
"""Where these tools come in the catalogue (``workflows.domain.catalogue``), which is the order
the model reads them in."""

SPECS = (
    ToolSpec(
        name="get_product_details", args=GetProductDetailsArgs, tool_class=ToolClass.READ,
        description="Read a product's variants (item ids, options, price, availability).",
        scope=Scope.CUSTOMER, fold=folds.product, reads="product_id",
    ),
    ToolSpec(
        name="list_all_product_types", args=ListAllProductTypesArgs, tool_class=ToolClass.READ,
        description="List the 50 product types with their product ids.",
        scope=Scope.CUSTOMER,
    ),
    ToolSpec(
        name="get_item_details", args=GetItemDetailsArgs, tool_class=ToolClass.READ,
        description="Read one item (a product variant) by its item id: product id, options, availability, price.",
        scope=Scope.CUSTOMER,
    ),
)
