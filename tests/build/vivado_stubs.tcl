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
# and the interface nets the AXI automation (bd_rule:axi4) makes: it refuses a target pin that
# is already connected, a new interconnect for an end that is already connected, and an end
# connected to another interconnect than intc_ip names. Before `exit` the log gets one
# ["nets", "<pin> <pin>", ...] line: every interface net the design has.
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
# ---- the block design's interface nets, as far as the AXI automation builds them
# ::net(<pin>) = net name; ::net_pins(<net>) = its pins. Pins are full paths (/cell/PIN); a pin's
# mode follows Vivado's names: M_AXI*, M00_AXI, M_AXIS* are masters, the rest slaves.
array set ::net {}
array set ::net_pins {}
set ::stub(nets) 0
set ::stub(intc) 0
array set ::intc_ports {}
proc pin_path {p} { return /[string trimleft $p /] }
proc pin_mode {p} { return [expr {[string match {M*} [lindex [split $p /] end]] ? "Master" : "Slave"}] }
proc stub_connect {a b} {
  foreach p [list $a $b] {
    if {[info exists ::net($p)]} { error "vivado_stubs.tcl: $p is already connected (net $::net($p))" }
  }
  set n "net_[incr ::stub(nets)]"
  set ::net($a) $n
  set ::net($b) $n
  set ::net_pins($n) [list $a $b]
  return $n
}
# A new interconnect: AXI Interconnect or SmartConnect, named the way the automation names them.
proc stub_new_intc {kind} {
  switch -- $kind {
    "New AXI Interconnect" { set c /axi_interconnect_[incr ::stub(intc)] }
    "New AXI SmartConnect" { set c /axi_smc_[incr ::stub(intc)] }
    default { error "vivado_stubs.tcl: intc_ip $kind is neither an existing interconnect nor a new one" }
  }
  lappend ::stub(cells) $c
  set ::intc_ports($c,S) 0
  set ::intc_ports($c,M) 0
  return $c
}
proc stub_port {c side} {
  set i $::intc_ports($c,$side)
  incr ::intc_ports($c,$side)
  return [format "%s/%s%02d_AXI" $c $side $i]
}
# bd_rule:axi4: the target pin must be one end of Master/Slave and still unconnected; an end that
# is already connected must be on the interconnect intc_ip names (so it is reused, not doubled).
proc stub_axi4 {config target} {
  set cfg [dict create {*}$config]
  set m [pin_path [dict get $cfg Master]]
  set s [pin_path [dict get $cfg Slave]]
  set target [pin_path $target]
  if {$target ne $m && $target ne $s} { error "vivado_stubs.tcl: axi4 automation on $target, which is neither Master $m nor Slave $s" }
  if {[info exists ::net($target)]} { error "vivado_stubs.tcl: axi4 automation on $target, which is already connected" }
  set intc [dict get $cfg intc_ip]
  if {[string match "New *" $intc] || $intc eq "Auto"} {
    foreach p [list $m $s] {
      if {[info exists ::net($p)]} { error "vivado_stubs.tcl: $p is already connected, but intc_ip asks for a new interconnect" }
    }
    set c [stub_new_intc [expr {$intc eq "Auto" ? "New AXI Interconnect" : $intc}]]
  } else {
    if {[lsearch -exact $::stub(cells) $intc] < 0} { error "vivado_stubs.tcl: intc_ip $intc names no cell" }
    set c $intc
  }
  foreach {p side} [list $m S $s M] {
    if {[info exists ::net($p)]} {
      set other [lsearch -inline -not -exact $::net_pins($::net($p)) $p]
      if {![string match "$c/*" $other]} { error "vivado_stubs.tcl: $p is connected to $other, not to intc_ip $c" }
    } else {
      stub_connect $p [stub_port $c $side]
    }
  }
}
proc create_bd_cell {args} { hlsnn_log create_bd_cell {*}$args; lappend ::stub(cells) /[lindex $args end]; return /[lindex $args end] }
set ::stub(cells) {}
proc apply_bd_automation {args} {
  hlsnn_log apply_bd_automation {*}$args
  if {[lindex $args 1] eq "xilinx.com:bd_rule:axi4"} { stub_axi4 [lindex $args 3] [lindex $args end] }
  return ""
}
proc get_bd_cells {args} {
  hlsnn_log get_bd_cells {*}$args
  set i [lsearch $args -of_objects]
  if {$i >= 0} { return /[lindex [split [string trimleft [lindex $args [expr {$i + 1}]] /] /] 0] }
  return [lindex $args end]
}
proc get_bd_intf_pins {args} {
  hlsnn_log get_bd_intf_pins {*}$args
  set i [lsearch $args -of_objects]
  if {$i < 0} { return [lindex $args end] }
  set n [lindex $args [expr {$i + 1}]]
  if {![info exists ::net_pins($n)]} { return "" }
  set pins $::net_pins($n)
  set f [lsearch $args -filter]
  if {$f >= 0} {
    if {![regexp {^MODE == (Master|Slave)$} [lindex $args [expr {$f + 1}]] -> mode]} { error "vivado_stubs.tcl: unsupported filter" }
    set pins [lmap p $pins { expr {[pin_mode $p] eq $mode ? $p : [continue]} }]
  }
  return $pins
}
proc get_bd_intf_nets {args} {
  hlsnn_log get_bd_intf_nets {*}$args
  set i [lsearch $args -of_objects]
  set p [pin_path [lindex $args [expr {$i + 1}]]]
  return [expr {[info exists ::net($p)] ? $::net($p) : ""}]
}
proc get_bd_pins {args} { hlsnn_log get_bd_pins {*}$args; return [lindex $args end] }
proc connect_bd_intf_net {args} {
  hlsnn_log connect_bd_intf_net {*}$args
  stub_connect [pin_path [lindex $args end-1]] [pin_path [lindex $args end]]
  return ""
}
proc assign_bd_address {args} { hlsnn_log assign_bd_address {*}$args; return "" }
proc get_bd_addr_segs {args} { hlsnn_log get_bd_addr_segs {*}$args; return [lindex $args end] }
proc get_bd_addr_spaces {args} { hlsnn_log get_bd_addr_spaces {*}$args; return [lindex $args end] }
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
  set nets {}
  foreach n [lsort -dictionary [array names ::net_pins]] { lappend nets [join $::net_pins($n) " "] }
  hlsnn_log nets {*}$nets
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
