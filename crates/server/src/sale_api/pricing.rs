//! Ticket types, fees and tax as the API spells them.

use std::collections::BTreeMap;

use boxoffice_domain::pricing::{Fee, FeeBasis, Tax, TicketType};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A ticket type beyond the standard one, priced per section or tier.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TicketTypeBody {
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[A-Za-z0-9_]{1,64}$",
        example = "child"
    )]
    pub type_id: String,
    #[schema(min_length = 1, max_length = 200, example = "Child")]
    pub name: String,
    /// Face price by section name or tier id; a place not named does not sell the type.
    #[schema(value_type = BTreeMap<String, i64>)]
    pub prices: BTreeMap<String, i64>,
    /// At most this many of the type in one hold or order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub max_per_order: Option<u32>,
}

impl From<TicketTypeBody> for TicketType {
    fn from(body: TicketTypeBody) -> Self {
        Self {
            type_id: body.type_id,
            name: body.name,
            prices: body.prices,
            max_per_order: body.max_per_order,
        }
    }
}

impl From<&TicketType> for TicketTypeBody {
    fn from(t: &TicketType) -> Self {
        Self {
            type_id: t.type_id.clone(),
            name: t.name.clone(),
            prices: t.prices.clone(),
            max_per_order: t.max_per_order,
        }
    }
}

/// `ticket` or `order`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FeeBasisName {
    Ticket,
    Order,
}

/// A fee: `fixedMinor` plus `shareBp` basis points of the face value, per ticket or order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeeBody {
    #[schema(min_length = 1, max_length = 200, example = "Service fee")]
    pub name: String,
    pub per: FeeBasisName,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 100_000_000, default = 0)]
    pub fixed_minor: i64,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 10_000, default = 0)]
    pub share_bp: u32,
}

impl From<FeeBody> for Fee {
    fn from(body: FeeBody) -> Self {
        Self {
            name: body.name,
            per: match body.per {
                FeeBasisName::Ticket => FeeBasis::Ticket,
                FeeBasisName::Order => FeeBasis::Order,
            },
            fixed_minor: body.fixed_minor,
            share_bp: body.share_bp,
        }
    }
}

impl From<&Fee> for FeeBody {
    fn from(fee: &Fee) -> Self {
        Self {
            name: fee.name.clone(),
            per: match fee.per {
                FeeBasis::Ticket => FeeBasisName::Ticket,
                FeeBasis::Order => FeeBasisName::Order,
            },
            fixed_minor: fee.fixed_minor,
            share_bp: fee.share_bp,
        }
    }
}

/// The tax on face value and fees.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaxBody {
    #[schema(min_length = 1, max_length = 200, example = "VAT")]
    pub name: String,
    #[schema(minimum = 0, maximum = 10_000, example = 2000)]
    pub rate_bp: u32,
    /// Prices and fees include the tax; else it is added on top.
    pub included: bool,
}

impl From<TaxBody> for Tax {
    fn from(body: TaxBody) -> Self {
        Self {
            name: body.name,
            rate_bp: body.rate_bp,
            included: body.included,
        }
    }
}

impl From<&Tax> for TaxBody {
    fn from(tax: &Tax) -> Self {
        Self {
            name: tax.name.clone(),
            rate_bp: tax.rate_bp,
            included: tax.included,
        }
    }
}
