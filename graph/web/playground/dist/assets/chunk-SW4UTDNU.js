/*! Third-party notices: THIRD_PARTY_LICENSES.txt */
import{a,b}from"./chunk-Q5HWKHFH.js";import"./chunk-GK66SROI.js";import"./chunk-BZJHUGRE.js";import"./chunk-6ADXLTQ7.js";import"./chunk-IJHJQXBA.js";import"./chunk-JFPDBFN4.js";export{b as getWorker,a as jsonDefaults};
