"""Customer tools: identity lookups, the profile, the default address."""

from __future__ import annotations

from pydantic import Field

from workflows.domain.catalogue import details, folds, state_reads
from workflows.domain.catalogue.checks import identity_by_email, identity_by_name_zip
from workflows.domain.catalogue.spec import Scope, ToolArgs, ToolClass, ToolSpec

USER_ID = Field(min_length=1, max_length=100)
ADDRESS_FIELDS = frozenset({"address1", "address2", "city", "state", "country", "zip"})


class FindUserIdByEmailArgs(ToolArgs):
    email: str = Field(min_length=3, max_length=320)


class FindUserIdByNameZipArgs(ToolArgs):
    first_name: str = Field(min_length=1, max_length=100)
    last_name: str = Field(min_length=1, max_length=100)
    zip: str = Field(min_length=1, max_length=20)


class GetUserDetailsArgs(ToolArgs):
    user_id: str = USER_ID


class AddressArgs(ToolArgs):
    """A postal address; every field is personal data."""

    address1: str = Field(min_length=1, max_length=200)
    address2: str = Field(max_length=200)
    city: str = Field(min_length=1, max_length=100)
    state: str = Field(min_length=1, max_length=100)
    country: str = Field(min_length=1, max_length=100)
    zip: str = Field(min_length=1, max_length=20)


class ModifyUserAddressArgs(AddressArgs):
    user_id: str = USER_ID


POSITION = 10
"""Where these tools come in the catalogue (``workflows.domain.catalogue``), which is the order
the model reads them in."""

SPECS = (
    ToolSpec(
        name="find_user_id_by_email", args=FindUserIdByEmailArgs, tool_class=ToolClass.READ,
        description="Look up a customer's user id by email.",
        scope=Scope.IDENTIFY, check=identity_by_email, fold=folds.found_user("email"),
        state_driven=state_reads.customer_by_email,
        personal_data=frozenset({"email"}),
    ),
    ToolSpec(
        name="find_user_id_by_name_zip", args=FindUserIdByNameZipArgs, tool_class=ToolClass.READ,
        description="Look up a customer's user id by first name, last name and zip.",
        scope=Scope.IDENTIFY, check=identity_by_name_zip, fold=folds.found_user("name_zip"),
        state_driven=state_reads.customer_by_name_zip,
        personal_data=frozenset({"first_name", "last_name", "zip"}),
    ),
    ToolSpec(
        name="get_user_details", args=GetUserDetailsArgs, tool_class=ToolClass.READ,
        description="Read the authenticated customer's profile, payment methods and order ids.",
        scope=Scope.CUSTOMER, fold=folds.user, reads="user_id", state_driven=state_reads.customer_profile,
    ),
    ToolSpec(
        name="modify_user_address", args=ModifyUserAddressArgs, tool_class=ToolClass.REVERSIBLE_WRITE,
        description="Change the customer's default address (needs confirmation).",
        scope=Scope.CUSTOMER, detail=details.user_address, fold=folds.user,
        compensation="modify_user_address", compensation_from="address", personal_data=ADDRESS_FIELDS,
        noun="address change",
    ),
)
