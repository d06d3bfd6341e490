//! The editor side of a session over ACP: implements the core's `EditorIo` with
//! `fs/*`, `terminal/*`, `session/request_permission` and `elicitation/create` (Heron's
//! questions, and MCP servers' forms and pages, already checked by the core), and only uses
//! what the client advertised: an elicitation mode counts when its key is present and not
//! null.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use heron_core::tools::editor::{
    Answer, Call, EditorError, EditorIo, Elicitation, ElicitationAnswer, ElicitationModes, ExitStatus,
    FieldKind, FieldOption, FormField, PERMISSION_OPTIONS, PermissionAnswer, PermissionAsk, QuestionAnswer,
    TerminalCommand, TerminalOutput, TextFormat, Unanswered,
};
use heron_protocol::runtime::{ClientPeer, Outgoing, PendingReply};
use heron_protocol::{
    BooleanPropertySchema, ClientCapabilities, CreateElicitationRequest, CreateElicitationRequestForm,
    CreateElicitationRequestUrl, CreateElicitationResponse, CreateTerminalRequest, CreateTerminalResponse,
    ElicitationContentValue, ElicitationId, ElicitationPropertySchema, ElicitationSchema, EnumOption,
    IntegerPropertySchema, KillTerminalRequest, KillTerminalResponse, MultiSelectItems,
    MultiSelectPropertySchema, NumberPropertySchema, PermissionOption, PermissionOptionId,
    PermissionOptionKind, ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest,
    ReleaseTerminalResponse, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    RpcError, SessionId, StringFormat, StringMultiSelectItems, StringPropertySchema, TerminalId,
    TerminalOutputRequest, TerminalOutputResponse, TitledMultiSelectItems, WaitForTerminalExitRequest,
    WaitForTerminalExitResponse, WriteTextFileRequest, WriteTextFileResponse,
};

/// One session's view of the editor.
#[derive(Debug, Clone)]
pub struct AcpEditor<O> {
    client: ClientPeer<O>,
    session_id: String,
    reads: bool,
    writes: bool,
    terminals: bool,
    confined_terminals: bool,
    questions: bool,
    modes: ElicitationModes,
    /// How long an MCP server's form or page waits for the user ([`ELICITATION_TIMEOUT`]).
    elicitation_timeout: Duration,
}

/// How long an MCP server's form or page waits for the user.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);

impl<O: Outgoing> AcpEditor<O> {
    /// The editor of session `session_id`, limited to `capabilities`.
    pub fn new(client: ClientPeer<O>, session_id: String, capabilities: &ClientCapabilities) -> Self {
        let fs = capabilities.fs.as_ref();
        Self {
            client,
            session_id,
            reads: fs.and_then(|f| f.read_text_file).unwrap_or(false),
            writes: fs.and_then(|f| f.write_text_file).unwrap_or(false),
            terminals: capabilities.terminal.unwrap_or(false),
            // Heron's own client (`heron run`) confines the commands it runs in its terminals.
            confined_terminals: capabilities
                .meta
                .as_ref()
                .and_then(|meta| meta.get("heron")?.get("confinedTerminals")?.as_bool())
                .unwrap_or(false),
            // `elicitation: {}` advertises no mode: only a present `form` counts.
            questions: capabilities.elicitation.as_ref().is_some_and(|e| e.form.is_some()),
            modes: ElicitationModes {
                form: capabilities.elicitation.as_ref().is_some_and(|e| e.form.is_some()),
                url: capabilities.elicitation.as_ref().is_some_and(|e| e.url.is_some()),
            },
            elicitation_timeout: ELICITATION_TIMEOUT,
        }
    }

    fn sid(&self) -> SessionId {
        SessionId(self.session_id.clone())
    }

    /// Calls `method` with the connection's own timeout.
    fn call<P, R, T>(
        &self,
        method: &'static str,
        params: P,
        answer: impl FnOnce(Result<R, RpcError>) -> T + Send + 'static,
    ) -> Call<T>
    where
        P: serde::Serialize + Send + 'static,
        R: serde::de::DeserializeOwned + Send + 'static,
        T: Send + 'static,
    {
        call(self.client.0.queue_call(method, params, self.client.0.call_timeout()), answer)
    }
}

/// A call to the editor in the core's two halves: `queued` puts it in the connection, and
/// `answer` reads what came back.
fn call<R, T>(
    queued: impl Future<Output = PendingReply<R>> + Send + 'static,
    answer: impl FnOnce(Result<R, RpcError>) -> T + Send + 'static,
) -> Call<T>
where
    R: Send + 'static,
    T: Send + 'static,
{
    Call::new(async move {
        let reply = queued.await;
        Answer::new(async move { answer(reply.await) })
    })
}

/// The most of an editor's error text passed on to the model.
const MAX_EDITOR_ERROR: usize = 2000;

/// An editor's error as the model reads it: its message, and the detail SDKs put in
/// `data` (the TypeScript SDK answers a thrown error as "Internal error" with
/// `data.details`), so "disk full" is not lost behind a generic message.
fn failed(err: RpcError) -> EditorError {
    let detail = match &err.data {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(text)) => Some(text.clone()),
        Some(data) => ["details", "message", "reason", "error"]
            .iter()
            .find_map(|key| data.get(key).and_then(serde_json::Value::as_str).map(str::to_owned))
            .or_else(|| Some(data.to_string())),
    };
    let text = match detail {
        Some(detail) if !detail.is_empty() && !err.message.contains(&detail) => {
            format!("{} ({detail}; code {})", err.message, err.code)
        }
        _ => format!("{} (code {})", err.message, err.code),
    };
    // The editor is a peer: its text is clipped and kept to one line of printable characters.
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    EditorError(heron_core::secret::clip(&clean, MAX_EDITOR_ERROR))
}

/// A checked form field as ACP's flat property schema.
fn property(field: &FormField) -> ElicitationPropertySchema {
    let (title, description) = (field.title.clone(), field.description.clone());
    let text = |enum_, one_of, default| StringPropertySchema {
        default,
        description: description.clone(),
        enum_,
        format: None,
        max_length: None,
        meta: None,
        min_length: None,
        one_of,
        pattern: None,
        title: title.clone(),
    };
    let titled = |options: &[FieldOption]| options.iter().any(|o| o.title.is_some());
    let enum_options = |options: &[FieldOption]| -> Vec<EnumOption> {
        options
            .iter()
            .map(|o| EnumOption {
                const_: o.value.clone(),
                description: None,
                meta: None,
                title: o.title.clone().unwrap_or_else(|| o.value.clone()),
            })
            .collect()
    };
    let values = |options: &[FieldOption]| options.iter().map(|o| o.value.clone()).collect::<Vec<_>>();
    match &field.kind {
        FieldKind::Text { min_length, max_length, format, default } => {
            ElicitationPropertySchema::String(StringPropertySchema {
                format: format.map(|format| match format {
                    TextFormat::Email => StringFormat::Email,
                    TextFormat::Uri => StringFormat::Uri,
                    TextFormat::Date => StringFormat::Date,
                    TextFormat::DateTime => StringFormat::DateTime,
                }),
                max_length: u32::try_from(*max_length).ok(),
                min_length: u32::try_from(*min_length).ok().filter(|n| *n > 0),
                ..text(None, None, default.clone())
            })
        }
        // The core keeps numbers within 2^53, so an integer's bounds convert exactly.
        FieldKind::Number { integer: true, minimum, maximum, default } => {
            ElicitationPropertySchema::Integer(IntegerPropertySchema {
                default: default.map(|n| n as i64),
                description,
                maximum: maximum.map(|n| n as i64),
                meta: None,
                minimum: minimum.map(|n| n as i64),
                title,
            })
        }
        FieldKind::Number { integer: false, minimum, maximum, default } => {
            ElicitationPropertySchema::Number(NumberPropertySchema {
                default: *default,
                description,
                maximum: *maximum,
                meta: None,
                minimum: *minimum,
                title,
            })
        }
        FieldKind::Boolean { default } => ElicitationPropertySchema::Boolean(BooleanPropertySchema {
            default: *default,
            description,
            meta: None,
            title,
        }),
        FieldKind::Choice { options, default } if titled(options) => {
            ElicitationPropertySchema::String(text(None, Some(enum_options(options)), default.clone()))
        }
        FieldKind::Choice { options, default } => {
            ElicitationPropertySchema::String(text(Some(values(options)), None, default.clone()))
        }
        FieldKind::Choices { options, min, max, default } => {
            ElicitationPropertySchema::Array(MultiSelectPropertySchema {
                default: (!default.is_empty()).then(|| default.clone()),
                description,
                items: if titled(options) {
                    MultiSelectItems::Titled(TitledMultiSelectItems {
                        any_of: enum_options(options),
                        meta: None,
                    })
                } else {
                    MultiSelectItems::String(StringMultiSelectItems { enum_: values(options), meta: None })
                },
                max_items: u64::try_from(*max).ok(),
                meta: None,
                min_items: u64::try_from(*min).ok().filter(|n| *n > 0),
                title,
            })
        }
    }
}

/// An MCP server's checked request as `elicitation/create`.
fn elicitation_request(request: Elicitation, session_id: SessionId) -> CreateElicitationRequest {
    match request {
        Elicitation::Form { message, fields } => {
            CreateElicitationRequest::Form(CreateElicitationRequestForm {
                message,
                meta: None,
                request_id: None,
                requested_schema: ElicitationSchema {
                    description: None,
                    meta: None,
                    required: Some(fields.iter().filter(|f| f.required).map(|f| f.name.clone()).collect()),
                    properties: fields.iter().map(|f| (f.name.clone(), property(f))).collect(),
                    title: None,
                    type_: Some(heron_protocol::ElicitationSchemaType::Object),
                },
                session_id: Some(session_id),
                tool_call_id: None,
            })
        }
        Elicitation::Url { message, url, id } => CreateElicitationRequest::Url(CreateElicitationRequestUrl {
            elicitation_id: ElicitationId(id),
            message,
            meta: None,
            request_id: None,
            session_id: Some(session_id),
            tool_call_id: None,
            url,
        }),
    }
}

/// The editor's answer in core terms; the core checks an accepted form against itself.
fn elicitation_answer(response: CreateElicitationResponse) -> ElicitationAnswer {
    match response {
        CreateElicitationResponse::Accept(accept) => {
            let content = serde_json::to_value(accept.content.unwrap_or_default()).unwrap_or_default();
            ElicitationAnswer::Accept(content.as_object().cloned().unwrap_or_default())
        }
        CreateElicitationResponse::Cancel(_) => ElicitationAnswer::Cancel,
        // An answer Heron does not know is no consent.
        CreateElicitationResponse::Decline(_) | CreateElicitationResponse::Other(_) => {
            ElicitationAnswer::Decline
        }
    }
}

/// The wire kind of an option Heron offers.
fn option_kind(answer: PermissionAnswer) -> PermissionOptionKind {
    match answer {
        PermissionAnswer::AllowOnce => PermissionOptionKind::AllowOnce,
        PermissionAnswer::AllowAlways => PermissionOptionKind::AllowAlways,
        PermissionAnswer::RejectAlways => PermissionOptionKind::RejectAlways,
        _ => PermissionOptionKind::RejectOnce,
    }
}

fn answer_of(response: Result<RequestPermissionResponse, RpcError>) -> PermissionAnswer {
    match response {
        Ok(RequestPermissionResponse { outcome: RequestPermissionOutcome::Cancelled, .. }) => {
            PermissionAnswer::Cancelled
        }
        Ok(RequestPermissionResponse { outcome: RequestPermissionOutcome::Selected(selected), .. }) => {
            PermissionAnswer::of_option(&selected.option_id.0)
        }
        // An error, a malformed reply or a timeout runs nothing either, and says which.
        Err(err) => unanswered(&err),
    }
}

/// What a failed permission request means: a timeout (`$/cancel_request` went out with
/// `reason: "timeout"`), or an editor that answered with an error.
pub(crate) fn unanswered(err: &RpcError) -> PermissionAnswer {
    let timed_out =
        err.data.as_ref().and_then(|d| d.get("reason")).and_then(|r| r.as_str()) == Some("timeout");
    if timed_out {
        PermissionAnswer::Unanswered(Unanswered::TimedOut)
    } else {
        tracing::info!(%err, "permission request failed; nothing runs");
        PermissionAnswer::Unanswered(Unanswered::Failed)
    }
}

impl<O: Outgoing> EditorIo for AcpEditor<O> {
    fn reads_files(&self) -> bool {
        self.reads
    }

    fn writes_files(&self) -> bool {
        self.writes
    }

    fn has_terminals(&self) -> bool {
        self.terminals
    }

    fn confines_terminals(&self) -> bool {
        self.confined_terminals
    }

    fn asks_questions(&self) -> bool {
        self.questions
    }

    fn read_text_file(&self, path: &Path) -> Call<Result<String, EditorError>> {
        let request = ReadTextFileRequest {
            limit: None,
            line: None,
            meta: None,
            path: path.display().to_string(),
            session_id: self.sid(),
        };
        self.call("fs/read_text_file", request, |r: Result<ReadTextFileResponse, _>| {
            r.map(|r| r.content).map_err(failed)
        })
    }

    fn write_text_file(&self, path: &Path, content: String) -> Call<Result<(), EditorError>> {
        let request = WriteTextFileRequest {
            content,
            meta: None,
            path: path.display().to_string(),
            session_id: self.sid(),
        };
        self.call("fs/write_text_file", request, |r: Result<WriteTextFileResponse, _>| {
            r.map(|_| ()).map_err(failed)
        })
    }

    fn terminal_create(&self, command: TerminalCommand) -> Call<Result<String, EditorError>> {
        let request = CreateTerminalRequest {
            args: command.args,
            command: command.command,
            cwd: Some(command.cwd),
            env: Vec::new(),
            meta: None,
            output_byte_limit: Some(command.output_byte_limit),
            session_id: self.sid(),
        };
        self.call("terminal/create", request, |r: Result<CreateTerminalResponse, _>| {
            r.map(|r| r.terminal_id.0).map_err(failed)
        })
    }

    fn terminal_output(&self, id: &str) -> Call<Result<TerminalOutput, EditorError>> {
        let request =
            TerminalOutputRequest { meta: None, session_id: self.sid(), terminal_id: TerminalId(id.into()) };
        self.call("terminal/output", request, |r: Result<TerminalOutputResponse, _>| {
            let r = r.map_err(failed)?;
            Ok(TerminalOutput {
                output: r.output,
                truncated: r.truncated,
                exit: r.exit_status.map(|e| ExitStatus { code: e.exit_code, signal: e.signal }),
            })
        })
    }

    fn terminal_wait_for_exit(&self, id: &str) -> Call<Result<ExitStatus, EditorError>> {
        let request = WaitForTerminalExitRequest {
            meta: None,
            session_id: self.sid(),
            terminal_id: TerminalId(id.into()),
        };
        // The command may run as long as the tool allows: the tool bounds the wait.
        let queued = self.client.0.queue_call("terminal/wait_for_exit", request, None);
        call(queued, |r: Result<WaitForTerminalExitResponse, _>| {
            let r = r.map_err(failed)?;
            Ok(ExitStatus { code: r.exit_code, signal: r.signal })
        })
    }

    fn terminal_kill(&self, id: &str) -> Call<Result<(), EditorError>> {
        let request =
            KillTerminalRequest { meta: None, session_id: self.sid(), terminal_id: TerminalId(id.into()) };
        self.call("terminal/kill", request, |r: Result<KillTerminalResponse, _>| {
            r.map(|_| ()).map_err(failed)
        })
    }

    fn terminal_release(&self, id: &str) -> Call<Result<(), EditorError>> {
        let request =
            ReleaseTerminalRequest { meta: None, session_id: self.sid(), terminal_id: TerminalId(id.into()) };
        self.call("terminal/release", request, |r: Result<ReleaseTerminalResponse, _>| {
            r.map(|_| ()).map_err(failed)
        })
    }

    fn request_permission(&self, ask: &PermissionAsk, timeout: Duration) -> Call<PermissionAnswer> {
        let request = RequestPermissionRequest {
            meta: None,
            options: PERMISSION_OPTIONS
                .iter()
                .map(|(id, name, answer)| PermissionOption {
                    kind: option_kind(*answer),
                    meta: None,
                    name: (*name).to_owned(),
                    option_id: PermissionOptionId((*id).to_owned()),
                })
                .collect(),
            session_id: self.sid(),
            tool_call: super::convert::permission_call(ask),
        };
        let queued = self.client.0.queue_call("session/request_permission", request, Some(timeout));
        call(queued, answer_of)
    }

    fn elicitation_modes(&self) -> ElicitationModes {
        self.modes
    }

    fn elicit(&self, request: Elicitation) -> Call<Result<ElicitationAnswer, EditorError>> {
        let request = elicitation_request(request, self.sid());
        let queued = self.client.0.queue_call("elicitation/create", request, Some(self.elicitation_timeout));
        call(queued, |r: Result<CreateElicitationResponse, _>| r.map(elicitation_answer).map_err(failed))
    }

    fn ask(
        &self,
        question: &str,
        options: &[String],
        call_id: Option<&str>,
    ) -> Call<Result<QuestionAnswer, EditorError>> {
        // The choices go both ways ACP's string schema has: `enum` (the tinycode guide's flat
        // schema, which simple clients read) and `oneOf` with titles.
        let answer = StringPropertySchema {
            default: None,
            description: None,
            enum_: (!options.is_empty()).then(|| options.to_vec()),
            format: None,
            // What Heron gives the model; the core holds an answer to it whatever comes.
            max_length: u32::try_from(heron_core::tools::question::MAX_ANSWER_CHARS).ok(),
            meta: None,
            min_length: None,
            one_of: (!options.is_empty()).then(|| {
                options
                    .iter()
                    .map(|o| EnumOption {
                        const_: o.clone(),
                        description: None,
                        meta: None,
                        title: o.clone(),
                    })
                    .collect()
            }),
            pattern: None,
            title: Some("Answer".to_owned()),
        };
        let request = CreateElicitationRequest::Form(CreateElicitationRequestForm {
            message: question.to_owned(),
            meta: None,
            request_id: None,
            requested_schema: ElicitationSchema {
                description: None,
                meta: None,
                properties: BTreeMap::from([(
                    "answer".to_owned(),
                    ElicitationPropertySchema::String(answer),
                )]),
                required: Some(vec!["answer".to_owned()]),
                title: None,
                type_: Some(heron_protocol::ElicitationSchemaType::Object),
            },
            session_id: Some(self.sid()),
            // The card the question belongs to.
            tool_call_id: call_id.map(|id| heron_protocol::ToolCallId(id.to_owned())),
        });
        // A person answers: no deadline but the turn's own cancellation.
        let queued = self.client.0.queue_call("elicitation/create", request, None);
        call(queued, |r: Result<CreateElicitationResponse, _>| match r.map_err(failed)? {
            CreateElicitationResponse::Accept(accept) => {
                let value = accept.content.as_ref().and_then(|c| c.get("answer")).cloned();
                match value {
                    Some(ElicitationContentValue::String(text)) => Ok(QuestionAnswer::Answer(text)),
                    Some(other) => {
                        Ok(QuestionAnswer::Answer(serde_json::to_string(&other).unwrap_or_default()))
                    }
                    None => Err(EditorError("the answer was empty".to_owned())),
                }
            }
            CreateElicitationResponse::Decline(_) => Ok(QuestionAnswer::Declined),
            CreateElicitationResponse::Cancel(_) => Ok(QuestionAnswer::Cancelled),
            CreateElicitationResponse::Other(_) => {
                Err(EditorError("the editor gave an unknown answer".to_owned()))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_editors_error_reaches_the_model_as_one_clipped_line() {
        let long = format!("disk\nfull\u{1b}[2J {}", "y".repeat(10_000));
        let err = RpcError::new(-32603, "Internal error").with_data(serde_json::json!({ "details": long }));
        let EditorError(text) = failed(err);
        assert!(text.len() <= MAX_EDITOR_ERROR, "{}", text.len());
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text:?}");
        assert!(text.starts_with("Internal error (disk"), "{text}");
    }

    /// A dispatcher for an agent that is only ever the caller.
    struct CallsOnly;

    impl heron_rpc::Dispatcher for CallsOnly {
        fn dispatch_request(
            &self,
            method: &str,
            _: Option<&serde_json::value::RawValue>,
        ) -> Result<(heron_rpc::Policy, heron_rpc::ResponseFuture), RpcError> {
            Err(RpcError::method_not_found(method))
        }

        fn dispatch_notification(
            &self,
            _: &str,
            _: Option<&serde_json::value::RawValue>,
        ) -> Option<(heron_rpc::Policy, heron_rpc::NotificationFuture)> {
            None
        }
    }

    /// An MCP server's form the editor never answers fails once its wait is over (which
    /// the MCP client turns into a decline to the server), and the editor is told to stop
    /// showing it. Crossed with a short wait; the 600 s default is pinned.
    #[tokio::test]
    async fn an_unanswered_form_fails_past_its_wait_and_the_editor_is_told_to_stop() {
        use tokio::io::AsyncBufReadExt;
        assert_eq!(ELICITATION_TIMEOUT, Duration::from_secs(600));
        let (_editor_in, agent_in) = tokio::io::duplex(1 << 16);
        let (agent_out, editor_out) = tokio::io::duplex(1 << 16);
        let connection =
            heron_rpc::Connection::new(agent_in, agent_out, heron_rpc::ConnectionOptions::default());
        let peer = connection.peer();
        let serving = tokio::spawn(connection.serve(std::sync::Arc::new(CallsOnly)));
        let capabilities: ClientCapabilities =
            serde_json::from_value(serde_json::json!({ "elicitation": { "form": {} } }))
                .expect("capabilities");
        let mut editor = AcpEditor::new(ClientPeer(peer), "s1".to_owned(), &capabilities);
        assert_eq!(editor.elicitation_timeout, ELICITATION_TIMEOUT);
        editor.elicitation_timeout = Duration::from_millis(100);
        let form = Elicitation::Form { message: "Which color?".to_owned(), fields: Vec::new() };
        let answer = tokio::time::timeout(Duration::from_secs(5), editor.elicit(form)).await;
        let EditorError(why) = answer.expect("ends with its wait").expect_err("never answered");
        assert!(why.contains("-32800") && why.contains("timeout"), "{why}");
        let mut seen = tokio::io::BufReader::new(editor_out).lines();
        let mut sent = Vec::new();
        while sent.len() < 2 {
            let line = tokio::time::timeout(Duration::from_secs(5), seen.next_line()).await;
            let line = line.expect("a line").expect("read").expect("open");
            sent.push(serde_json::from_str::<serde_json::Value>(&line).expect("JSON"));
        }
        let (asked, stop) = (&sent[0], &sent[1]);
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        assert_eq!(stop["method"], "$/cancel_request", "{stop}");
        assert_eq!(stop["params"]["requestId"], asked["id"], "{stop}");
        serving.abort();
    }
}
