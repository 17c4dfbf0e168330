//! The words printed on tickets and passes: messages of the `tickets` catalogue in the
//! order's language, and its date written the way that language writes dates.

use time::OffsetDateTime;
use time::macros::format_description;

/// Message `id` of the `tickets` catalogue in `locale` (English when the locale is not
/// spoken).
pub fn message(locale: &str, id: &str, args: &[(&str, &str)]) -> String {
    boxoffice_i18n::message(locale, id, args)
}

/// `at` in `locale`, in its own UTC offset (the event's local time as the organiser gave
/// it): "March 14, 2027, 20:00 (UTC+01:00)", "14. März 2027, 20:00 Uhr (UTC+01:00)",
/// "2027年3月14日 20:00（UTC+01:00）". A 24-hour clock in every language.
pub fn date(locale: &str, at: OffsetDateTime) -> String {
    let month = message(
        locale,
        &format!("tickets-month-{}", u8::from(at.month())),
        &[],
    );
    let time = at
        .format(format_description!("[hour]:[minute]"))
        .unwrap_or_default();
    let offset = at.offset();
    let zone = if offset.is_utc() {
        "UTC".to_owned()
    } else {
        offset
            .format(format_description!(
                "UTC[offset_hour sign:mandatory]:[offset_minute]"
            ))
            .unwrap_or_default()
    };
    message(
        locale,
        "tickets-date",
        &[
            ("year", &at.year().to_string()),
            ("month", &month),
            ("day", &at.day().to_string()),
            ("time", &time),
            ("zone", &zone),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn dates_read_as_each_language_writes_them() {
        let at = datetime!(2027-03-14 20:05 +01:00);
        assert_eq!(date("en", at), "March 14, 2027, 20:05 (UTC+01:00)");
        assert_eq!(date("de", at), "14. März 2027, 20:05 Uhr (UTC+01:00)");
        assert_eq!(date("fr", at), "14 mars 2027, 20:05 (UTC+01:00)");
        assert_eq!(date("es", at), "14 de marzo de 2027, 20:05 (UTC+01:00)");
        assert_eq!(date("zh", at), "2027年3月14日 20:05（UTC+01:00）");
        assert_eq!(
            date("xx", datetime!(2027-12-01 09:00 UTC)),
            "December 1, 2027, 09:00 (UTC)"
        );
    }
}
