# Stub Vivado commands for running a rendered bd.tcl under plain tclsh:
#
#   tclsh vivado_stubs.tcl <bd.tcl> <call log> <ip_repo> <out_dir> <jobs>
#
# run from the folder Vivado would run in. Every stub appends one JSON array (command name,
# then its arguments as strings) to the call log, one line per call, flushed at once, so the
# log is complete whatever way the script ends. `exit` is logged and then really exits with
# the script's code. A command without a stub is logged as UNKNOWN and raises an error.
#
# The stubs model what Vivado leaves on disk where the script later looks for it:
#   generate_target  -> <project dir>/<project>.<gen|srcs>/sources_1/bd/<bd>/hw_handoff/<bd>.hwh
#   wait_on_run      -> <project dir>/<project>.runs/impl_1/<top>.bit (top: <bd>_wrapper, from
#                       make_wrapper -top), only for launch_runs ... -to_step write_bitstream and
#                       a run that reached 100%
# Environment knobs (all optional):
#   STUB_PROGRESS   PROGRESS of the run (default 100%)
#   STUB_STATUS     STATUS of the run (default "write_bitstream Complete!")
#   STUB_WNS        STATS.WNS (default 0.5)     STUB_WHS  STATS.WHS (default 0.5)
#   STUB_HWH_DIR    gen (2020.2 and later, default), srcs (earlier) or none
#   STUB_BOARD_PARTS  1 (board files installed, default) or 0
#   STUB_MISSING_IP   an IP name (e.g. axi_dma) the catalog does not have

proc env {name default} {
  if {[info exists ::env($name)]} { return $::env($name) }
  return $default
}

proc json_str {s} {
  return "\"[string map [list \\ \\\\ \" \\\" \n \\n \r \\r \t \\t] $s]\""
}

proc hlsnn_log {name args} {
  set parts [list [json_str $name]]
  foreach a $args { lappend parts [json_str $a] }
  puts $::hlsnn_fh "\[[join $parts ,]\]"
  flush $::hlsnn_fh
}

# state the stubs keep, as Vivado would
set ::stub(project) ""
set ::stub(project_dir) ""
set ::stub(bd) ""
set ::stub(top) ""
set ::stub(to_step) ""

proc create_project {args} {
  hlsnn_log create_project {*}$args
  # positional words: the project name and its folder (skip options and the value of -part)
  set words {}
  for {set i 0} {$i < [llength $args]} {incr i} {
    set a [lindex $args $i]
    if {$a eq "-part"} { incr i; continue }
    if {[string match -* $a]} { continue }
    lappend words $a
  }
  set ::stub(project) [lindex $words 0]
  set ::stub(project_dir) [lindex $words 1]
  file mkdir $::stub(project_dir)
  return $::stub(project)
}
proc current_project {args} { hlsnn_log current_project {*}$args; return $::stub(project) }
proc set_property {args} { hlsnn_log set_property {*}$args; return "" }
proc get_board_parts {args} {
  hlsnn_log get_board_parts {*}$args
  if {[env STUB_BOARD_PARTS 1]} { return [lindex $args end] }
  return ""
}
proc update_ip_catalog {args} { hlsnn_log update_ip_catalog {*}$args; return "" }
proc create_bd_design {args} {
  hlsnn_log create_bd_design {*}$args
  set ::stub(bd) [lindex $args end]
  return $::stub(bd)
}
# A catalog with more than one version of some IPs, listed out of order.
set ::stub(catalog) {
  xilinx.com:ip:processing_system7:5.5
  xilinx.com:ip:zynq_ultra_ps_e:3.4 xilinx.com:ip:zynq_ultra_ps_e:3.5
  xilinx.com:ip:axi_dma:7.1 xilinx.com:ip:axi_dma:7.0
  xilinx.com:ip:axi_interconnect:2.1 xilinx.com:ip:smartconnect:1.0
  xilinx.com:ip:proc_sys_reset:5.0
}
proc get_ipdefs {args} {
  hlsnn_log get_ipdefs {*}$args
  set pattern [lindex $args end]
  set out {}
  foreach v $::stub(catalog) {
    if {[string match $pattern $v] && [lindex [split $v :] 2] ne [env STUB_MISSING_IP ""]} { lappend out $v }
  }
  return $out
}
proc create_bd_cell {args} { hlsnn_log create_bd_cell {*}$args; return /[lindex $args end] }
proc apply_bd_automation {args} { hlsnn_log apply_bd_automation {*}$args; return "" }
proc get_bd_cells {args} { hlsnn_log get_bd_cells {*}$args; return [lindex $args end] }
proc get_bd_intf_pins {args} { hlsnn_log get_bd_intf_pins {*}$args; return [lindex $args end] }
proc get_bd_pins {args} { hlsnn_log get_bd_pins {*}$args; return [lindex $args end] }
proc connect_bd_intf_net {args} { hlsnn_log connect_bd_intf_net {*}$args; return "" }
proc assign_bd_address {args} { hlsnn_log assign_bd_address {*}$args; return "" }
proc get_bd_addr_segs {args} { hlsnn_log get_bd_addr_segs {*}$args; return [lindex $args end] }
proc validate_bd_design {args} { hlsnn_log validate_bd_design {*}$args; return "" }
proc save_bd_design {args} { hlsnn_log save_bd_design {*}$args; return "" }
proc get_files {args} {
  hlsnn_log get_files {*}$args
  return "$::stub(project_dir)/$::stub(project).srcs/sources_1/bd/$::stub(bd)/[lindex $args end]"
}
proc generate_target {args} {
  hlsnn_log generate_target {*}$args
  set d [env STUB_HWH_DIR gen]
  if {$d ne "none"} {
    set dir "$::stub(project_dir)/$::stub(project).$d/sources_1/bd/$::stub(bd)/hw_handoff"
    file mkdir $dir
    set f [open "$dir/$::stub(bd).hwh" w]
    puts $f "<?xml version=\"1.0\"?><EDKSYSTEM><SYSTEMINFO ARCH=\"stub\" BD=\"$::stub(bd)\" DIR=\"$d\"/></EDKSYSTEM>"
    close $f
  }
  return ""
}
proc make_wrapper {args} {
  hlsnn_log make_wrapper {*}$args
  if {[lsearch $args -top] >= 0} { set ::stub(top) "$::stub(bd)_wrapper" }
  return ""
}
proc launch_runs {args} {
  hlsnn_log launch_runs {*}$args
  set i [lsearch $args -to_step]
  if {$i >= 0} { set ::stub(to_step) [lindex $args [expr {$i + 1}]] }
  return [lindex $args 0]
}
proc wait_on_run {args} {
  hlsnn_log wait_on_run {*}$args
  if {$::stub(to_step) eq "write_bitstream" && [env STUB_PROGRESS 100%] eq "100%" && $::stub(top) ne ""} {
    set dir "$::stub(project_dir)/$::stub(project).runs/[lindex $args end]"
    file mkdir $dir
    set f [open "$dir/$::stub(top).bit" w]
    puts -nonewline $f "STUB-BITSTREAM $::stub(top)"
    close $f
  }
  return ""
}
proc get_runs {args} { hlsnn_log get_runs {*}$args; return [lindex $args end] }
proc get_property {args} {
  hlsnn_log get_property {*}$args
  switch -- [lindex $args 0] {
    PROGRESS { return [env STUB_PROGRESS 100%] }
    STATUS { return [env STUB_STATUS "write_bitstream Complete!"] }
    STATS.WNS { return [env STUB_WNS 0.5] }
    STATS.WHS { return [env STUB_WHS 0.5] }
  }
  return ""
}

rename unknown __real_unknown
proc unknown {args} {
  hlsnn_log UNKNOWN {*}$args
  error "vivado_stubs.tcl: no stub for command [lindex $args 0]"
}

rename exit __real_exit
proc exit {{code 0}} {
  hlsnn_log exit $code
  close $::hlsnn_fh
  __real_exit $code
}

set ::hlsnn_fh [open [lindex $argv 1] w]
set script [lindex $argv 0]
set ::argv [lrange $argv 2 end]
set ::argc [llength $::argv]
set ::argv0 $script
uplevel #0 [list source $script]
hlsnn_log END
close $::hlsnn_fh
