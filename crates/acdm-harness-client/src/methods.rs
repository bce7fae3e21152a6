//! The typed methods, one per BFF operation, written once for the four
//! clients (async and blocking, ambient and explicit identity): each is
//! `self.call(path, request)` (or `self.get(path)`) with the operation's
//! path from its enum and the request and data types the BFF parses and
//! sends. The async clients expand it with `async … .await`, the blocking
//! ones without.

/// Expands to the typed methods over `self.call` / `self.get`;
/// `typed_methods!(async; .await)` or `typed_methods!(;)`.
macro_rules! typed_methods {
    ($($kw:ident)? ; $($aw:tt)*) => {
        /// `nc/list_mounts`: the project's mounts.
        pub $($kw)? fn nc_list_mounts(&self) -> ::acdm_core::ToolResponse<::acdm_core::nc::MountsData> {
            self.call(::acdm_core::nc::NcOp::ListMounts.path(), &::acdm_core::nc::ListMountsRequest {}) $($aw)*
        }

        /// `nc/list`: one folder level.
        pub $($kw)? fn nc_list(
            &self,
            request: &::acdm_core::nc::ListRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::nc::ListData> {
            self.call(::acdm_core::nc::NcOp::List.path(), request) $($aw)*
        }

        /// `nc/read`: a window of a file.
        pub $($kw)? fn nc_read(
            &self,
            request: &::acdm_core::nc::ReadRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::nc::ReadData> {
            self.call(::acdm_core::nc::NcOp::Read.path(), request) $($aw)*
        }

        /// `nc/search`: files inside the project's mounts.
        pub $($kw)? fn nc_search(
            &self,
            request: &::acdm_core::nc::SearchRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::nc::SearchData> {
            self.call(::acdm_core::nc::NcOp::Search.path(), request) $($aw)*
        }

        /// `nc/write`: create or overwrite a file (recorded, revertible).
        pub $($kw)? fn nc_write(
            &self,
            request: &::acdm_core::nc::WriteRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::nc::WriteData> {
            self.call(::acdm_core::nc::NcOp::Write.path(), request) $($aw)*
        }

        /// `nc/delete`: a dry run unless `dry_run` is false.
        pub $($kw)? fn nc_delete(
            &self,
            request: &::acdm_core::nc::DeleteRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::nc::DeleteData> {
            self.call(::acdm_core::nc::NcOp::Delete.path(), request) $($aw)*
        }

        /// `nc/move`: rename or move (never over an existing item unless asked).
        pub $($kw)? fn nc_move(
            &self,
            request: &::acdm_core::nc::MoveRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::nc::MoveData> {
            self.call(::acdm_core::nc::NcOp::Move.path(), request) $($aw)*
        }

        /// `business/list_meetings`: meetings in a window, by start, paged.
        pub $($kw)? fn business_list_meetings(
            &self,
            request: &::acdm_core::business::wire::ListMeetingsRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::Paged<::acdm_core::business::Meeting>> {
            self.call(::acdm_core::business::wire::BusinessOp::ListMeetings.path(), request) $($aw)*
        }

        /// `business/get_meeting`: one meeting with its files.
        pub $($kw)? fn business_get_meeting(
            &self,
            request: &::acdm_core::business::wire::MeetingRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::MeetingData> {
            self.call(::acdm_core::business::wire::BusinessOp::GetMeeting.path(), request) $($aw)*
        }

        /// `business/create_meeting` (recorded, revertible).
        pub $($kw)? fn business_create_meeting(
            &self,
            request: &::acdm_core::business::wire::CreateMeetingRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::MeetingWritten> {
            self.call(::acdm_core::business::wire::BusinessOp::CreateMeeting.path(), request) $($aw)*
        }

        /// `business/update_meeting`: a stale `if_version` is a `conflict`
        /// naming the current version (its `data` does not fit
        /// `MeetingWritten` and is dropped; use `call` to keep it).
        pub $($kw)? fn business_update_meeting(
            &self,
            request: &::acdm_core::business::wire::UpdateMeetingRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::MeetingWritten> {
            self.call(::acdm_core::business::wire::BusinessOp::UpdateMeeting.path(), request) $($aw)*
        }

        /// `business/delete_meeting`: a dry run unless `dry_run` is false.
        pub $($kw)? fn business_delete_meeting(
            &self,
            request: &::acdm_core::business::wire::DeleteMeetingRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::DeleteMeetingData> {
            self.call(::acdm_core::business::wire::BusinessOp::DeleteMeeting.path(), request) $($aw)*
        }

        /// `business/list_meeting_files`: a meeting's files.
        pub $($kw)? fn business_list_meeting_files(
            &self,
            request: &::acdm_core::business::wire::MeetingRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::Paged<::acdm_core::business::MeetingFile>> {
            self.call(::acdm_core::business::wire::BusinessOp::ListMeetingFiles.path(), request) $($aw)*
        }

        /// `business/attach_meeting_file`: write and register a file.
        pub $($kw)? fn business_attach_meeting_file(
            &self,
            request: &::acdm_core::business::wire::AttachMeetingFileRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::MeetingFileWritten> {
            self.call(::acdm_core::business::wire::BusinessOp::AttachMeetingFile.path(), request) $($aw)*
        }

        /// `business/delete_meeting_file`: the file into the trash, the row
        /// removed.
        pub $($kw)? fn business_delete_meeting_file(
            &self,
            request: &::acdm_core::business::wire::DeleteMeetingFileRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::MeetingFileWritten> {
            self.call(::acdm_core::business::wire::BusinessOp::DeleteMeetingFile.path(), request) $($aw)*
        }

        /// `business/list_calendar`: meetings and milestone due dates.
        pub $($kw)? fn business_list_calendar(
            &self,
            request: &::acdm_core::business::wire::ListCalendarRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::Paged<::acdm_core::business::wire::CalendarEntry>> {
            self.call(::acdm_core::business::wire::BusinessOp::ListCalendar.path(), request) $($aw)*
        }

        /// `business/list_reports`: newest first, paged.
        pub $($kw)? fn business_list_reports(
            &self,
            request: &::acdm_core::business::wire::ListReportsRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::Paged<::acdm_core::business::Report>> {
            self.call(::acdm_core::business::wire::BusinessOp::ListReports.path(), request) $($aw)*
        }

        /// `business/get_report`: one report with its history.
        pub $($kw)? fn business_get_report(
            &self,
            request: &::acdm_core::business::wire::ReportRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::ReportDetails> {
            self.call(::acdm_core::business::wire::BusinessOp::GetReport.path(), request) $($aw)*
        }

        /// `business/update_report_status`: one move of the approval flow.
        pub $($kw)? fn business_update_report_status(
            &self,
            request: &::acdm_core::business::wire::UpdateReportStatusRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::ReportStatusData> {
            self.call(::acdm_core::business::wire::BusinessOp::UpdateReportStatus.path(), request) $($aw)*
        }

        /// `business/list_members`: the project's members.
        pub $($kw)? fn business_list_members(
            &self,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::wire::Paged<::acdm_core::business::MemberInfo>> {
            self.call(
                ::acdm_core::business::wire::BusinessOp::ListMembers.path(),
                &::acdm_core::business::wire::EmptyRequest {},
            ) $($aw)*
        }

        /// `business/get_project_meta`: the project's meta.
        pub $($kw)? fn business_get_project_meta(
            &self,
        ) -> ::acdm_core::ToolResponse<::acdm_core::business::ProjectMeta> {
            self.call(
                ::acdm_core::business::wire::BusinessOp::GetProjectMeta.path(),
                &::acdm_core::business::wire::EmptyRequest {},
            ) $($aw)*
        }

        /// `GET project/overview`: meta, milestones, upcoming meetings,
        /// reports, members, recent agent writes — cheap enough for every
        /// prompt.
        pub $($kw)? fn project_overview(
            &self,
        ) -> ::acdm_core::ToolResponse<::acdm_core::project::OverviewData> {
            self.get(::acdm_core::project::ProjectOp::Overview.path()) $($aw)*
        }

        /// `GET project/sow`: the statement of work.
        pub $($kw)? fn project_sow(&self) -> ::acdm_core::ToolResponse<::acdm_core::project::SowData> {
            self.get(::acdm_core::project::ProjectOp::Sow.path()) $($aw)*
        }

        /// `project/milestone/advance`: the current milestone done, the
        /// next one current (admins and owners).
        pub $($kw)? fn project_advance_milestone(
            &self,
            request: &::acdm_core::project::AdvanceMilestoneRequest,
        ) -> ::acdm_core::ToolResponse<::acdm_core::project::AdvanceData> {
            self.call(::acdm_core::project::ProjectOp::AdvanceMilestone.path(), request) $($aw)*
        }
    };
}

pub(crate) use typed_methods;
