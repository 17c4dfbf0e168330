//! Who will use a ticket: the holder's name and the answers to the event's own questions
//! (a date of birth, a membership number), asked before payment, carried on the ticket,
//! printed on the PDF and the wallet pass, shown at the door, changeable by the owner until
//! the event's cutoff.
//!
//! The rules are decided here once: what an event may ask ([`HolderPolicy::validate`]), what
//! a fan's answers must look like ([`HolderDetails::validate`], against the policy), and what
//! is still missing before a checkout may start ([`HolderPolicy::missing`]). The store keeps
//! what the routes validated; the checkout route refuses a hold whose tickets still miss a
//! required answer.
//!
//! A ticket with no holder given is held by its account: a transfer's new tickets start so
//! (the receiver is the holder until they name someone).

use std::collections::BTreeMap;

use crate::event::SpecError;

/// Questions one event may ask per ticket.
pub const QUESTIONS_MAX: usize = 20;
/// Longest question id, in bytes (ASCII letters, digits, `_` and `-`).
pub const QUESTION_ID_LEN_MAX: usize = 40;
/// Longest question label, in characters.
pub const QUESTION_LABEL_LEN_MAX: usize = 200;
/// Longest holder name, in characters.
pub const HOLDER_NAME_LEN_MAX: usize = 200;
/// Longest answer to a `TEXT` question, in characters.
pub const ANSWER_LEN_MAX: usize = 200;
/// Longest change cutoff: a year before the start.
pub const CHANGE_CUTOFF_MAX_S: u32 = 31_536_000;

/// What a question's answer is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum QuestionKind {
    /// Free text, up to [`ANSWER_LEN_MAX`] characters.
    Text,
    /// A calendar date, `YYYY-MM-DD`.
    Date,
}

impl QuestionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "TEXT",
            Self::Date => "DATE",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "TEXT" => Some(Self::Text),
            "DATE" => Some(Self::Date),
            _ => None,
        }
    }
}

/// One question an event asks per ticket. (Stored as this JSON, the API's shape.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HolderQuestion {
    pub question_id: String,
    pub label: String,
    pub kind: QuestionKind,
    pub required: bool,
}

/// What an event asks of each ticket's holder (absent: a name may be given, nothing is
/// asked). Stored as this JSON, the API's shape.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HolderPolicy {
    /// Every ticket needs a holder's name before payment.
    pub name_required: bool,
    pub questions: Vec<HolderQuestion>,
    /// The owner may change a ticket's holder until this long before the start, by the
    /// store's clock (0: until the start).
    #[serde(rename = "changeCutoffSeconds")]
    pub change_cutoff_s: u32,
}

/// A holder as given for one ticket: a name, and answers by question id (the answers
/// stored as this JSON object).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HolderDetails {
    pub name: Option<String>,
    pub answers: BTreeMap<String, String>,
}

fn refuse(field: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Text a person typed: no control characters, not blank, at most `max` characters.
fn check_text(field: &str, text: &str, max: usize) -> Result<(), SpecError> {
    if text.trim().is_empty() {
        return Err(refuse(field, "must not be blank"));
    }
    if text.chars().count() > max {
        return Err(refuse(field, format!("at most {max} characters")));
    }
    if text.chars().any(char::is_control) {
        return Err(refuse(field, "must not contain control characters"));
    }
    Ok(())
}

/// `YYYY-MM-DD`, a real date.
fn is_date(raw: &str) -> bool {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    raw.len() == 10 && time::Date::parse(raw, &format).is_ok()
}

impl HolderPolicy {
    /// Whether the policy asks anything before a checkout.
    pub fn requires_anything(&self) -> bool {
        self.name_required || self.questions.iter().any(|q| q.required)
    }

    /// The policy as an organiser may set it: at most [`QUESTIONS_MAX`] questions, ids unique
    /// and short, labels present, the cutoff within a year.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.questions.len() > QUESTIONS_MAX {
            return Err(refuse(
                "holderPolicy.questions",
                format!("at most {QUESTIONS_MAX} questions"),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, question) in self.questions.iter().enumerate() {
            let field = format!("holderPolicy.questions[{i}]");
            let id = &question.question_id;
            if id.is_empty()
                || id.len() > QUESTION_ID_LEN_MAX
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(refuse(
                    format!("{field}.questionId"),
                    format!("1-{QUESTION_ID_LEN_MAX} ASCII letters, digits, '_' or '-'"),
                ));
            }
            if !seen.insert(id.as_str()) {
                return Err(refuse(format!("{field}.questionId"), "asked twice"));
            }
            check_text(
                &format!("{field}.label"),
                &question.label,
                QUESTION_LABEL_LEN_MAX,
            )?;
        }
        if self.change_cutoff_s > CHANGE_CUTOFF_MAX_S {
            return Err(refuse(
                "holderPolicy.changeCutoffSeconds",
                format!("between 0 and {CHANGE_CUTOFF_MAX_S}"),
            ));
        }
        Ok(())
    }

    /// What `details` still lack for the policy (a required name or answer), named as the
    /// answer's field would be; `None` when nothing is missing.
    pub fn missing(&self, details: Option<&HolderDetails>) -> Option<String> {
        let name_given = details.is_some_and(|d| d.name.is_some());
        if self.name_required && !name_given {
            return Some("name".into());
        }
        self.questions
            .iter()
            .filter(|q| q.required)
            .find(|q| !details.is_some_and(|d| d.answers.contains_key(&q.question_id)))
            .map(|q| format!("answers.{}", q.question_id))
    }

    /// The question `question_id` asks, if any.
    pub fn question(&self, question_id: &str) -> Option<&HolderQuestion> {
        self.questions.iter().find(|q| q.question_id == question_id)
    }
}

impl HolderDetails {
    /// The details as a fan may give them under `policy` (none: no questions): a name of at
    /// most [`HOLDER_NAME_LEN_MAX`] characters, only answers to the policy's questions, each
    /// of its kind. `field` prefixes the refusal's field (`holders[2]`). Required answers are
    /// not checked here: they may come in a later call ([`HolderPolicy::missing`]).
    pub fn validate(&self, policy: Option<&HolderPolicy>, field: &str) -> Result<(), SpecError> {
        if let Some(name) = &self.name {
            check_text(&format!("{field}.name"), name, HOLDER_NAME_LEN_MAX)?;
        }
        for (id, answer) in &self.answers {
            let answer_field = format!("{field}.answers.{id}");
            let Some(question) = policy.and_then(|p| p.question(id)) else {
                return Err(refuse(answer_field, "the event asks no such question"));
            };
            match question.kind {
                QuestionKind::Text => check_text(&answer_field, answer, ANSWER_LEN_MAX)?,
                QuestionKind::Date if !is_date(answer) => {
                    return Err(refuse(answer_field, "a date, YYYY-MM-DD"));
                }
                QuestionKind::Date => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HolderPolicy {
        HolderPolicy {
            name_required: true,
            questions: vec![
                HolderQuestion {
                    question_id: "dob".into(),
                    label: "Date of birth".into(),
                    kind: QuestionKind::Date,
                    required: true,
                },
                HolderQuestion {
                    question_id: "club".into(),
                    label: "Supporters' club".into(),
                    kind: QuestionKind::Text,
                    required: false,
                },
            ],
            change_cutoff_s: 3600,
        }
    }

    fn details(name: Option<&str>, answers: &[(&str, &str)]) -> HolderDetails {
        HolderDetails {
            name: name.map(str::to_owned),
            answers: answers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn a_required_name_then_a_required_answer_is_missing() {
        let policy = policy();
        assert_eq!(policy.missing(None).as_deref(), Some("name"));
        assert_eq!(
            policy.missing(Some(&details(Some("Ada"), &[]))).as_deref(),
            Some("answers.dob")
        );
        assert_eq!(
            policy.missing(Some(&details(Some("Ada"), &[("dob", "1990-01-31")]))),
            None
        );
        assert!(!HolderPolicy::default().requires_anything());
        assert_eq!(HolderPolicy::default().missing(None), None);
    }

    #[test]
    fn answers_are_checked_against_their_question() {
        let policy = policy();
        let ok = details(Some("Ada"), &[("dob", "1990-01-31"), ("club", "North")]);
        assert_eq!(ok.validate(Some(&policy), "holders[0]"), Ok(()));
        let bad_date = details(None, &[("dob", "1990-02-30")]);
        assert_eq!(
            bad_date
                .validate(Some(&policy), "holders[0]")
                .unwrap_err()
                .field,
            "holders[0].answers.dob"
        );
        let unknown = details(None, &[("shoe", "42")]);
        assert!(unknown.validate(Some(&policy), "h").is_err());
        assert!(unknown.validate(None, "h").is_err());
        let blank = details(Some("  "), &[]);
        assert!(blank.validate(None, "h").is_err());
        let control = details(Some("Ada\u{7}"), &[]);
        assert!(control.validate(None, "h").is_err());
        let long = details(Some(&"x".repeat(HOLDER_NAME_LEN_MAX + 1)), &[]);
        assert!(long.validate(None, "h").is_err());
        let name_only = details(Some("Zhang Wei 张伟"), &[]);
        assert_eq!(name_only.validate(None, "h"), Ok(()));
    }

    #[test]
    fn a_policy_is_refused_with_duplicate_or_bad_ids_too_many_questions_or_a_long_cutoff() {
        assert_eq!(policy().validate(), Ok(()));
        let mut twice = policy();
        twice.questions[1].question_id = "dob".into();
        assert!(twice.validate().is_err());
        let mut bad_id = policy();
        bad_id.questions[0].question_id = "date of birth".into();
        assert!(bad_id.validate().is_err());
        let mut many = policy();
        many.questions = (0..=QUESTIONS_MAX)
            .map(|i| HolderQuestion {
                question_id: format!("q{i}"),
                label: "Q".into(),
                kind: QuestionKind::Text,
                required: false,
            })
            .collect();
        assert!(many.validate().is_err());
        let mut late = policy();
        late.change_cutoff_s = CHANGE_CUTOFF_MAX_S + 1;
        assert!(late.validate().is_err());
    }
}
