//! Synchronous calls for call sites that are not async (feature
//! `blocking`). Each client owns a small current-thread runtime; do not
//! call it from inside an async runtime (use [`crate::HarnessClient`]
//! there).

use std::cell::RefCell;

use acdm_core::business::wire::{
    AttachMeetingFileRequest, BusinessOp, CalendarEntry, CreateMeetingRequest, DeleteMeetingData,
    DeleteMeetingFileRequest, DeleteMeetingRequest, EmptyRequest, ListCalendarRequest,
    ListMeetingsRequest, ListReportsRequest, MeetingData, MeetingFileWritten, MeetingRequest,
    MeetingWritten, Paged, ReportRequest, ReportStatusData, UpdateMeetingRequest,
    UpdateReportStatusRequest,
};
use acdm_core::business::{Meeting, MeetingFile, MemberInfo, ProjectMeta, Report, ReportDetails};
use acdm_core::nc::{
    DeleteData, DeleteRequest, ListData, ListMountsRequest, ListRequest, MountsData, MoveData,
    MoveRequest, NcOp, ReadData, ReadRequest, SearchData, SearchRequest, WriteData, WriteRequest,
};
use acdm_core::{ErrorCode, Identity, ToolResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::{ClientConfig, ConfigError};

thread_local! {
    static IDENTITY: RefCell<Option<Identity>> = const { RefCell::new(None) };
}

/// Runs `work` on this thread with `identity` as the caller of every
/// blocking call inside it (restoring the previous one afterwards).
pub fn with_identity<R>(identity: Identity, work: impl FnOnce() -> R) -> R {
    let previous = IDENTITY.with(|slot| slot.replace(Some(identity)));
    let result = work();
    IDENTITY.with(|slot| *slot.borrow_mut() = previous);
    result
}

/// The blocking client.
#[derive(Debug)]
pub struct BlockingClient {
    inner: crate::HarnessClient,
    runtime: tokio::runtime::Runtime,
}

impl BlockingClient {
    /// A blocking client for `config`.
    pub fn new(config: ClientConfig) -> Result<Self, ConfigError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ConfigError::Http(e.to_string()))?;
        Ok(Self {
            inner: crate::HarnessClient::new(config)?,
            runtime,
        })
    }

    /// A blocking client configured from the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(ClientConfig::from_env()?)
    }

    fn run<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        identity: Option<Identity>,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return ToolResponse::failure(
                ErrorCode::InternalError,
                "the blocking harness client was called from async code; use HarnessClient there",
            );
        }
        self.runtime.block_on(self.inner.send(identity, path, body))
    }

    /// [`crate::HarnessClient::call`], blocking, as the thread's identity
    /// (see [`with_identity`]).
    pub fn call<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        let identity = IDENTITY.with(|slot| slot.borrow().clone());
        self.run(identity, path, body)
    }

    /// [`Self::call`] as an explicit identity.
    pub fn call_as<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        identity: &Identity,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        self.run(Some(identity.clone()), path, body)
    }

    /// `nc/list_mounts`.
    pub fn nc_list_mounts(&self) -> ToolResponse<MountsData> {
        self.call(NcOp::ListMounts.path(), &ListMountsRequest {})
    }

    /// `nc/list`.
    pub fn nc_list(&self, request: &ListRequest) -> ToolResponse<ListData> {
        self.call(NcOp::List.path(), request)
    }

    /// `nc/read`.
    pub fn nc_read(&self, request: &ReadRequest) -> ToolResponse<ReadData> {
        self.call(NcOp::Read.path(), request)
    }

    /// `nc/search`.
    pub fn nc_search(&self, request: &SearchRequest) -> ToolResponse<SearchData> {
        self.call(NcOp::Search.path(), request)
    }

    /// `nc/write`.
    pub fn nc_write(&self, request: &WriteRequest) -> ToolResponse<WriteData> {
        self.call(NcOp::Write.path(), request)
    }

    /// `nc/delete`.
    pub fn nc_delete(&self, request: &DeleteRequest) -> ToolResponse<DeleteData> {
        self.call(NcOp::Delete.path(), request)
    }

    /// `nc/move`.
    pub fn nc_move(&self, request: &MoveRequest) -> ToolResponse<MoveData> {
        self.call(NcOp::Move.path(), request)
    }

    /// `business/list_meetings`.
    pub fn business_list_meetings(
        &self,
        request: &ListMeetingsRequest,
    ) -> ToolResponse<Paged<Meeting>> {
        self.call(BusinessOp::ListMeetings.path(), request)
    }

    /// `business/get_meeting`.
    pub fn business_get_meeting(&self, request: &MeetingRequest) -> ToolResponse<MeetingData> {
        self.call(BusinessOp::GetMeeting.path(), request)
    }

    /// `business/create_meeting`.
    pub fn business_create_meeting(
        &self,
        request: &CreateMeetingRequest,
    ) -> ToolResponse<MeetingWritten> {
        self.call(BusinessOp::CreateMeeting.path(), request)
    }

    /// `business/update_meeting`.
    pub fn business_update_meeting(
        &self,
        request: &UpdateMeetingRequest,
    ) -> ToolResponse<MeetingWritten> {
        self.call(BusinessOp::UpdateMeeting.path(), request)
    }

    /// `business/delete_meeting`.
    pub fn business_delete_meeting(
        &self,
        request: &DeleteMeetingRequest,
    ) -> ToolResponse<DeleteMeetingData> {
        self.call(BusinessOp::DeleteMeeting.path(), request)
    }

    /// `business/list_meeting_files`.
    pub fn business_list_meeting_files(
        &self,
        request: &MeetingRequest,
    ) -> ToolResponse<Paged<MeetingFile>> {
        self.call(BusinessOp::ListMeetingFiles.path(), request)
    }

    /// `business/attach_meeting_file`.
    pub fn business_attach_meeting_file(
        &self,
        request: &AttachMeetingFileRequest,
    ) -> ToolResponse<MeetingFileWritten> {
        self.call(BusinessOp::AttachMeetingFile.path(), request)
    }

    /// `business/delete_meeting_file`.
    pub fn business_delete_meeting_file(
        &self,
        request: &DeleteMeetingFileRequest,
    ) -> ToolResponse<MeetingFileWritten> {
        self.call(BusinessOp::DeleteMeetingFile.path(), request)
    }

    /// `business/list_calendar`.
    pub fn business_list_calendar(
        &self,
        request: &ListCalendarRequest,
    ) -> ToolResponse<Paged<CalendarEntry>> {
        self.call(BusinessOp::ListCalendar.path(), request)
    }

    /// `business/list_reports`.
    pub fn business_list_reports(
        &self,
        request: &ListReportsRequest,
    ) -> ToolResponse<Paged<Report>> {
        self.call(BusinessOp::ListReports.path(), request)
    }

    /// `business/get_report`.
    pub fn business_get_report(&self, request: &ReportRequest) -> ToolResponse<ReportDetails> {
        self.call(BusinessOp::GetReport.path(), request)
    }

    /// `business/update_report_status`.
    pub fn business_update_report_status(
        &self,
        request: &UpdateReportStatusRequest,
    ) -> ToolResponse<ReportStatusData> {
        self.call(BusinessOp::UpdateReportStatus.path(), request)
    }

    /// `business/list_members`.
    pub fn business_list_members(&self) -> ToolResponse<Paged<MemberInfo>> {
        self.call(BusinessOp::ListMembers.path(), &EmptyRequest {})
    }

    /// `business/get_project_meta`.
    pub fn business_get_project_meta(&self) -> ToolResponse<ProjectMeta> {
        self.call(BusinessOp::GetProjectMeta.path(), &EmptyRequest {})
    }
}
